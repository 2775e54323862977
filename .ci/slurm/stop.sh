#!/usr/bin/env bash
# Stops the daemons started by .ci/slurm/start.sh, in reverse order, by the pid files it wrote.
set -uo pipefail
STATE="${EVOAUDIT_SLURM_STATE:-/var/lib/evoaudit-slurm}"
stop_pid() {  # stop_pid PIDFILE: TERM, wait up to 10 s, then KILL
  local f="$1" pid
  [ -s "$f" ] || return 0
  pid="$(cat "$f")"
  kill -0 "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
  kill "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}
scancel --user=root >/dev/null 2>&1 || true
stop_pid "$STATE/slurmd.pid"
stop_pid "$STATE/slurmctld.pid"
stop_pid "$STATE/slurmdbd.pid"
stop_pid /run/mysqld/mysqld.pid
stop_pid /run/munge/munged.pid
echo "slurm stopped"
