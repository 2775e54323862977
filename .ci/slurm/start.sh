#!/usr/bin/env bash
# Starts a single-node SLURM cluster on this machine without systemd, in the order the daemons need:
# munged -> mariadbd -> slurmdbd -> slurmctld -> slurmd (a node named localhost at 127.0.0.1).
# slurmdbd is there because the Snakemake SLURM executor polls job status with sacct, which fails without
# accounting storage (the plugin would then wait forever). Everything binds to 127.0.0.1 and runs as root.
# Run .ci/slurm/install.sh first; stop with .ci/slurm/stop.sh. Exits non-zero, naming the daemon, on failure.
set -euo pipefail
STATE="${EVOAUDIT_SLURM_STATE:-/var/lib/evoaudit-slurm}"
LOGS="$STATE/log"
CPUS="$(nproc)"
# Leave 1 GiB to the rest of the machine; slurmd refuses a node that claims more than it has.
MEM_MB="$(( $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) - 1024 ))"
mkdir -p "$STATE"/{ctld,spool,mysql} "$LOGS" /run/munge /run/mysqld /etc/slurm
chown munge:munge /run/munge && chmod 0755 /run/munge
chown mysql:mysql /run/mysqld "$STATE/mysql"

fail() { echo "slurm start: $1 did not come up; see $LOGS/$2" >&2; tail -n 20 "$LOGS/$2" >&2 || true; exit 1; }
wait_for() {  # wait_for SECONDS COMMAND...: poll until COMMAND succeeds
  local deadline=$(( SECONDS + $1 )); shift
  until "$@" >/dev/null 2>&1; do (( SECONDS < deadline )) || return 1; sleep 0.2; done
}

# munge: key from the package, else make one.
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
# munged insists that its log and socket directories belong to it alone.
mkdir -p "$LOGS/munge" && chown munge:munge "$LOGS/munge" && chmod 0700 "$LOGS/munge"
if ! pgrep -x munged >/dev/null; then
  runuser -u munge -- /usr/sbin/munged --log-file="$LOGS/munge/munged.log" >>"$LOGS/munged.out" 2>&1 || true
fi
wait_for 10 bash -c 'munge -n | unmunge' || fail munged munge/munged.log

# MariaDB on a private data directory, listening on 127.0.0.1 only.
SOCK=/run/mysqld/mysqld.sock  # the default socket, where slurmdbd looks for "localhost"
mkdir -p "$LOGS/mysql" && chown mysql:mysql "$LOGS/mysql"
if [ ! -d "$STATE/mysql/mysql" ]; then
  mariadb-install-db --user=mysql --datadir="$STATE/mysql" --auth-root-authentication-method=socket \
    >"$LOGS/mariadb-install.log" 2>&1 || fail mariadb-install-db mariadb-install.log
fi
if [ ! -S "$SOCK" ] || ! mariadb --socket="$SOCK" -e 'select 1' >/dev/null 2>&1; then
  nohup /usr/sbin/mariadbd --user=mysql --datadir="$STATE/mysql" --socket="$SOCK" --bind-address=127.0.0.1 \
    --port=3306 --pid-file=/run/mysqld/mysqld.pid --log-error="$LOGS/mysql/mariadbd.log" >/dev/null 2>&1 &
fi
wait_for 30 mariadb --socket="$SOCK" -e 'select 1' || fail mariadbd mysql/mariadbd.log
mariadb --socket="$SOCK" <<'SQL'
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'evoaudit-ci';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL

cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
LogFile=$LOGS/slurmdbd.log
PidFile=$STATE/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageUser=slurm
StoragePass=evoaudit-ci
StorageLoc=slurm_acct_db
CONF
chmod 0600 /etc/slurm/slurmdbd.conf

cat > /etc/slurm/slurm.conf <<CONF
ClusterName=evoaudit
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default, each job claims the node's whole memory and jobs run one at a time.
DefMemPerCPU=512
# Finished jobs stay visible to squeue for a while (the fallback status command without a database).
MinJobAge=300
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=main Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF

pgrep -x slurmdbd >/dev/null || /usr/sbin/slurmdbd
wait_for 30 sacctmgr -n show cluster || fail slurmdbd slurmdbd.log
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
wait_for 30 scontrol ping || fail slurmctld slurmctld.log
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd -N localhost
wait_for 30 bash -c 'sinfo -h -N -o %T | grep -qE "^(idle|mixed|allocated)"' || {
  scontrol update nodename=localhost state=resume >/dev/null 2>&1 || true
  wait_for 15 bash -c 'sinfo -h -N -o %T | grep -qE "^(idle|mixed|allocated)"' || fail slurmd slurmd.log
}
# slurmctld registers the cluster with slurmdbd itself; wait until sacct answers for it.
wait_for 30 sacct -n -X -S now-1minute || fail "sacct (slurmdbd accounting)" slurmdbd.log
echo "slurm up: $(sinfo -h -o '%P %D %T %c cpus %m MB')"
