#!/usr/bin/env bash
# Installs a single-node SLURM cluster from Debian's packages (no systemd needed) and the Snakemake SLURM
# executor plugin into the given Python. Idempotent. Usage: bash .ci/slurm/install.sh [PYTHON]
set -euo pipefail
PY="${1:-python3}"
if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null || ! command -v munged >/dev/null \
   || ! command -v mariadbd >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Package scripts try to start services; there is no init system here, so forbid that.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends slurm-wlm slurm-client munge slurmdbd mariadb-server >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi
# Note: once the plugin is installed, every snakemake command probes SLURM at start; with the daemons down
# each probe waits for its timeout (~9 s per command). Start the cluster right after installing it and
# keep it up while tests run (.ci/slurm/start.sh), then stop it (.ci/slurm/stop.sh).
"$PY" -c 'import snakemake_executor_plugin_slurm' 2>/dev/null \
  || "$PY" -m pip install --quiet 'snakemake-executor-plugin-slurm==2.8.0'
echo "slurm: $(slurmctld -V)"
