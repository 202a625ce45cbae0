#!/usr/bin/env bash
# A one-node Slurm cluster in a folder, for the tests (and for trying `trainyard submit` by hand):
#   cluster.sh start DIR [CPUS]   munged, slurmctld and slurmd, everything under DIR; prints the
#                                 environment to use it (SLURM_CONF=...), waits until the node is idle
#   cluster.sh stop DIR           stops the three daemons
# Debian's slurm-wlm and munge (scripts/setup.sh installs them). Accounting is off (no slurmdbd):
# sacct answers with an error, as on clusters without accounting. Runs as root (SlurmUser=root).
set -euo pipefail
command=${1:?usage: cluster.sh start|stop DIR [CPUS]}
dir=$(mkdir -p "${2:?usage: cluster.sh start|stop DIR [CPUS]}" && cd "$2" && pwd)
cpus=${3:-$(nproc)}

stop() {
  for daemon in slurmd slurmctld munged; do
    [ -f "$dir/$daemon.pid" ] && kill "$(cat "$dir/$daemon.pid")" 2>/dev/null || true
  done
  for daemon in slurmd slurmctld munged; do
    for _ in $(seq 50); do
      [ -f "$dir/$daemon.pid" ] && kill -0 "$(cat "$dir/$daemon.pid")" 2>/dev/null || break
      sleep 0.1
    done
    rm -f "$dir/$daemon.pid"
  done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() {
  for tool in munged mungekey slurmctld slurmd sbatch; do
    command -v "$tool" >/dev/null || { echo "cluster.sh: $tool is missing; run scripts/setup.sh (it installs slurm-wlm and munge)" >&2; exit 1; }
  done
  [ "$(id -u)" = 0 ] || { echo "cluster.sh: the one-node cluster runs as root (SlurmUser=root)" >&2; exit 1; }
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir/munge"
  [ -f "$dir/munge/munge.key" ] || mungekey --create --keyfile="$dir/munge/munge.key" --force
  chmod 400 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"
  local ctld_port slurmd_port
  ctld_port=$(free_port); slurmd_port=$(free_port)
  cat >"$dir/slurm.conf" <<CONF
ClusterName=trainyard-test
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=5
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerParameters=sched_interval=1
MinJobAge=600
MaxArraySize=1001
MpiDefault=none
MailProg=/bin/true
KillWait=10
JobRequeue=1
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -i -f "$SLURM_CONF"
  slurmd -N localhost -f "$SLURM_CONF"
  for _ in $(seq 100); do
    if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
      echo "SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  echo "cluster.sh: the node did not become idle in 20 s; see $dir/slurmctld.log and $dir/slurmd.log" >&2
  sinfo >&2 || true
  exit 1
}

case "$command" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: cluster.sh start|stop DIR [CPUS]" >&2; exit 2 ;;
esac
