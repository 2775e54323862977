#!/usr/bin/env bash
# Serves Qwen2.5-Coder-0.5B-Instruct (.ci/install-qwen.sh; QWEN_SIZE=1.5b: the 1.5B model, served as
# qwen2.5-coder-1.5b-instruct for config/examples/local-qwen-1.5b.yaml) with llama.cpp's llama-server
# (.ci/install-llama-server.sh) on 127.0.0.1, in the background, for config/examples/local-qwen.yaml.
# Waits until GET /v1/models answers and prints the base URL on the last line of stdout. Idempotent: a server
# already answering on the port is reused (nothing is started). `stop` ends the server this script started
# on that port (its pid is in the cache folder).
# Usage: bash .ci/serve-qwen.sh [PORT]          (default 8089)
#        bash .ci/serve-qwen.sh stop [PORT]
# Environment: QWEN_SIZE (0.5b or 1.5b, default 0.5b),
#              QWEN_SLOTS (llama-server --parallel, default 2: match the config's concurrency),
#              QWEN_CTX (total context, split over the slots, default 8192 per slot),
#              QWEN_THREADS (default 2), PYTHON (the environment with llama-server linked in, default python3).
set -euo pipefail
cmd="serve"
if [ "${1:-}" = "stop" ]; then cmd="stop"; shift; fi
PORT="${1:-8089}"
SLOTS="${QWEN_SLOTS:-2}"
THREADS="${QWEN_THREADS:-2}"
CTX="${QWEN_CTX:-$((8192 * SLOTS))}"
PY="${PYTHON:-python3}"
ALIAS="qwen2.5-coder-${QWEN_SIZE:-0.5b}-instruct"
STATE="${EVOAUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evoaudit}/serve-qwen"
PIDFILE="$STATE/$PORT.pid"
LOG="$STATE/$PORT.log"
BASE="http://127.0.0.1:$PORT/v1"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

answers() {  # 0 when GET /v1/models lists the model and /health says the model is loaded (not 503)
  "$PY" - "$BASE" "$ALIAS" <<'EOF'
import json, sys, urllib.request
base, alias = sys.argv[1], sys.argv[2]
try:
    with urllib.request.urlopen(f"{base}/models", timeout=2) as r:
        ids = [m.get("id") for m in json.load(r).get("data", [])]
except Exception:
    sys.exit(1)
if alias not in ids:
    sys.exit(2)
try:
    with urllib.request.urlopen(base.removesuffix("/v1") + "/health", timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
}

if [ "$cmd" = "stop" ]; then
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    kill "$(cat "$PIDFILE")"
    echo "stopped llama-server on port $PORT (pid $(cat "$PIDFILE"))"
  else
    echo "no llama-server started by this script on port $PORT"
  fi
  rm -f "$PIDFILE"
  exit 0
fi

rc=0; answers || rc=$?
if [ "$rc" = 0 ]; then
  echo "reusing the server answering on port $PORT" >&2
  echo "$BASE"
  exit 0
elif [ "$rc" = 2 ]; then
  echo "serve-qwen: port $PORT answers but does not list model '$ALIAS'; choose another port" >&2
  exit 1
fi

MODEL="$(bash "$HERE/install-qwen.sh" "$PY" | tail -n 1)"
bash "$HERE/install-llama-server.sh" "$PY" >&2
BIN="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')")/llama-server"
mkdir -p "$STATE"
# setsid: the server outlives this script and the terminal; `stop` ends it.
setsid "$BIN" --model "$MODEL" --alias "$ALIAS" --jinja --host 127.0.0.1 --port "$PORT" \
  --ctx-size "$CTX" --threads "$THREADS" --parallel "$SLOTS" --no-webui >"$LOG" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$PIDFILE"
for _ in $(seq 1 240); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "serve-qwen: llama-server exited; last lines of $LOG:" >&2
    tail -n 30 "$LOG" >&2
    rm -f "$PIDFILE"
    exit 1
  fi
  if answers; then
    echo "llama-server (pid $pid, $SLOTS slots, log $LOG) serves $ALIAS" >&2
    echo "$BASE"
    exit 0
  fi
  sleep 0.5
done
echo "serve-qwen: no answer from $BASE within 120 s; log: $LOG" >&2
exit 1
