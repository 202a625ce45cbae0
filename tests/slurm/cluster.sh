#!/usr/bin/env bash
# A Slurm cluster in a folder, for the tests (and for trying `trainyard submit` by hand):
#   cluster.sh start DIR [CPUS [NODES]]   munged, slurmctld and slurmd, everything under DIR; prints
#                                         the environment to use it (SLURM_CONF=...), waits until
#                                         every node is idle
#   cluster.sh stop DIR                   stops the daemons (and removes the nodes' namespaces)
# One node by default: slurmd on this machine as "localhost". NODES=2 makes two nodes, node1 and
# node2, each a slurmd in its own network namespace (its own address on a bridge, 10.213.X.11 and
# .12) with its own hostname (a UTS namespace) and an /etc/hosts naming the nodes (a mount
# namespace): what runs on a node sees the machine's files and processes, but reaches the other
# node only through the network, as on a cluster. slurmctld stays in this namespace (10.213.X.1).
# Debian's slurm-wlm and munge (scripts/setup.sh installs them), iproute2 and util-linux. Accounting
# is off (no slurmdbd): sacct answers with an error, as on clusters without accounting. Runs as
# root (SlurmUser=root).
set -euo pipefail
usage="usage: cluster.sh start|stop DIR [CPUS [NODES]]"
command=${1:?$usage}
dir=$(mkdir -p "${2:?$usage}" && cd "$2" && pwd)
cpus=${3:-$(nproc)}
nodes=${4:-1}
# The two-node cluster's names: from the folder, so that clusters in two folders never meet.
net_id=$(( $(printf '%s' "$dir" | cksum | cut -d' ' -f1) % 250 + 1 ))
subnet=10.213.$net_id
bridge=tyslurm$net_id
namespace() { echo "tyslurm$net_id-node$1"; }

daemons() { echo slurmd slurmd-node1 slurmd-node2 slurmctld munged; }

stop() {
  for daemon in $(daemons); do
    [ -f "$dir/$daemon.pid" ] && kill "$(cat "$dir/$daemon.pid")" 2>/dev/null || true
  done
  for daemon in $(daemons); do
    for _ in $(seq 50); do
      [ -f "$dir/$daemon.pid" ] && kill -0 "$(cat "$dir/$daemon.pid")" 2>/dev/null || break
      sleep 0.1
    done
    rm -f "$dir/$daemon.pid"
  done
  for n in 1 2; do
    if ip netns list 2>/dev/null | grep -qw "$(namespace $n)"; then
      ip netns pids "$(namespace $n)" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "$(namespace $n)"
    fi
  done
  ip link del "$bridge" 2>/dev/null || true
}

# The two nodes' network: a bridge here, and in each node's namespace one end of a veth pair.
make_network() {
  command -v ip >/dev/null || { echo "cluster.sh: ip (iproute2) is missing" >&2; exit 1; }
  ip link add "$bridge" type bridge
  ip addr add "$subnet.1/24" dev "$bridge"
  ip link set "$bridge" up
  for n in 1 2; do
    local ns veth="tyv$net_id-$n"
    ns=$(namespace $n)
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$bridge" up
    ip -n "$ns" addr add "$subnet.1$n/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
  printf '127.0.0.1 localhost\n%s ctl\n%s node1\n%s node2\n' \
    "$subnet.1" "$subnet.11" "$subnet.12" >"$dir/hosts"
}

# slurmd as node N, inside its namespaces; what it starts (the jobs' steps) inherits them.
start_node() {
  local n=$1
  # nsenter, not `ip netns exec`, which mounts a sysfs of its own and so hides the cgroup file
  # system slurmd needs.
  nsenter --net="/run/netns/$(namespace "$n")" unshare --uts --mount --propagation private \
    sh -c "mount --bind '$dir/hosts' /etc/hosts && hostname node$n && exec slurmd -N node$n -f '$SLURM_CONF'"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() {
  for tool in munged mungekey slurmctld slurmd sbatch; do
    command -v "$tool" >/dev/null || { echo "cluster.sh: $tool is missing; run scripts/setup.sh (it installs slurm-wlm and munge)" >&2; exit 1; }
  done
  [ "$(id -u)" = 0 ] || { echo "cluster.sh: the one-node cluster runs as root (SlurmUser=root)" >&2; exit 1; }
  [ "$nodes" = 1 ] || stop  # what a killed test left of this folder's nodes and their network
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir/munge"
  [ -f "$dir/munge/munge.key" ] || mungekey --create --keyfile="$dir/munge/munge.key" --force
  chmod 400 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"
  local ctld_port slurmd_port controller node_lines
  ctld_port=$(free_port); slurmd_port=$(free_port)
  if [ "$nodes" = 1 ]; then
    controller=localhost
    node_lines="NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP"
  elif [ "$nodes" = 2 ]; then
    make_network
    controller="$(hostname -s)($subnet.1)"  # slurmctld starts only on the host its name names
    node_lines="NodeName=node1 NodeAddr=$subnet.11 CPUs=$cpus State=UNKNOWN
NodeName=node2 NodeAddr=$subnet.12 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP"
  else
    echo "cluster.sh: NODES is 1 or 2, not '$nodes'" >&2; exit 2
  fi
  # More CPUs than the machine has (a study's driver job beside its trials' jobs on two cores):
  # slurmd then takes the configured count instead of marking the node invalid.
  local overrides=""
  [ "$cpus" -le "$(nproc)" ] || overrides="SlurmdParameters=config_overrides"
  cat >"$dir/slurm.conf" <<CONF
ClusterName=trainyard-test
SlurmctldHost=$controller
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=5
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd$([ "$nodes" = 1 ] || echo -%n).pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd$([ "$nodes" = 1 ] || echo -%n).log
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
$overrides
$node_lines
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -i -f "$SLURM_CONF"
  if [ "$nodes" = 1 ]; then
    slurmd -N localhost -f "$SLURM_CONF"
  else
    start_node 1
    start_node 2
  fi
  for _ in $(seq 100); do
    if [ "$(sinfo -h -N -o %T 2>/dev/null | grep -cx idle)" = "$nodes" ]; then
      echo "SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  echo "cluster.sh: the nodes did not become idle in 20 s; see $dir/slurmctld.log and $dir/slurmd*.log" >&2
  sinfo >&2 || true
  exit 1
}

case "$command" in
  start) start ;;
  stop) stop ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
