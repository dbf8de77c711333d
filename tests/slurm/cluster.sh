#!/usr/bin/env bash
# A three-node Slurm cluster on this machine for the Slurm scenarios (tests/slurm/scenarios.sh):
# munged, slurmctld and three slurmd, each slurmd in a network and UTS namespace of its own
# (hostname node1/node2/node3, its own address on a bridge), node1 and node2 with two simulated
# NVIDIA GPUs and node3 with one simulated AMD GPU and no NVIDIA GPU or library (the simulator's
# DRM driver), given to Slurm as GRES, and the shipped deploy/slurm prolog, epilog and health
# check configured as a site would. Root only. Slurm and munge come from Debian
# (scripts/setup-deps.sh).
#
#   cluster.sh start DIR SOURCE_DIR BUILD_DIR   configure in DIR (created, must not exist), start, wait until idle
#   cluster.sh stop DIR                         stop everything start started, remove DIR
#
# What the scenarios source: DIR/env (SLURM_CONF, the binaries' copies, the nodes' simulators).
set -euo pipefail

readonly net=10.213.21 bridge=gr21-br ctld_port=6917 slurmd_port=6918
readonly nodes=(node1 node2 node3) nvidia_nodes=(node1 node2) amd_pci=0000:c1:00.0
netns_name() { printf 'gr21-%s' "$1"; }

die() { printf 'cluster.sh: %s\n' "$*" >&2; exit 1; }

write_slurm_conf() {
  local dir=$1
  cat >"$dir/etc/slurm.conf" <<EOF
ClusterName=gpureap-test
MpiDefault=none
SlurmctldHost=ctld($net.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/ctld
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdSpoolDir=$dir/spool/%n
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# The job's processes: Slurm's cgroup v1 freezer (cgroup.conf). cgroup/v2 refuses this host's
# hybrid hierarchy ("Hybrid mode is not supported"); task/cgroup's ConstrainDevices cannot tell
# simulated GPUs apart (every one is 1:3, as /dev/null is).
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
# gpureap: every node's GPUs are checked before a job (Prolog; PrologFlags=Alloc runs it at
# allocation, before any step) and cleaned and verified after it (Epilog).
Prolog=$dir/etc/gpureap-prolog.sh
Epilog=$dir/etc/gpureap-epilog.sh
PrologFlags=Alloc
HealthCheckProgram=$dir/etc/gpureap-healthcheck.sh
HealthCheckInterval=3600
# Seconds, not minutes: a scenario waits for each of these.
KillWait=2
MessageTimeout=5
SlurmdTimeout=30
MinJobAge=600
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=node1 NodeAddr=$net.2 CPUs=2 Gres=gpu:2 State=UNKNOWN
NodeName=node2 NodeAddr=$net.3 CPUs=2 Gres=gpu:2 State=UNKNOWN
NodeName=node3 NodeAddr=$net.4 CPUs=2 Gres=gpu:1 State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  {
    for node in "${nvidia_nodes[@]}"; do
      printf 'NodeName=%s Name=gpu File=%s/%s/sim/dev/nvidia[0-1]\n' "$node" "$dir" "$node"
    done
    # The AMD GPU's nodes are the simulator's regular files, which slurmd takes for no GRES: a
    # character device of /dev/null's numbers stands for its render node (ConstrainDevices=no).
    printf 'NodeName=node3 Name=gpu File=%s/node3/gres-renderD128\n' "$dir"

  } >"$dir/etc/gres.conf"
  printf 'CgroupPlugin=cgroup/v1\nConstrainDevices=no\n' >"$dir/etc/cgroup.conf"
}

# A site's wrapper around a shipped script: the settings that locate gpureap and (here) the
# node's simulated driver, since slurmd gives prolog, epilog and health check no environment of
# its own.
write_wrapper() {
  local dir=$1 name=$2
  cat >"$dir/etc/gpureap-$name.sh" <<EOF
#!/bin/bash
node=\${SLURMD_NODENAME:-\$(hostname -s)}
export GPUSIM_STATE_DIR=$dir/\$node/sim GPUREAP_DEV_DIR=$dir/\$node/sim/dev
export GPUREAP_NVML_LIBRARY=$dir/bin/libnvidia-ml.so.1 GPUREAP=$dir/bin/gpureap
export GPUREAP_AUDIT_LOG=$dir/log/reap-\$node.log GPUREAP_KILL_TIMEOUT=1s GPUREAP_VERIFY_TIMEOUT=3s
export SLURM_CONF=$dir/etc/slurm.conf SCONTROL=/usr/bin/scontrol ASAN_OPTIONS=detect_leaks=0
# A node's own settings (node3: its AMD GPU's sysfs and fdinfo, and no NVIDIA library).
[[ -f $dir/\$node/gpureap.env ]] && . $dir/\$node/gpureap.env
exec /bin/bash $dir/etc/shipped/$name.sh
EOF
  chmod 0755 "$dir/etc/gpureap-$name.sh"
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "timed out waiting for $what"
    sleep 0.2
  done
}

nodes_idle() {
  local states
  states=$(sinfo -h -N -o '%N %t' | sort -u)
  [[ $states == $'node1 idle\nnode2 idle\nnode3 idle' ]]
}

start() {
  local dir=$1 source=$2 build=$3
  [[ $(id -u) == 0 ]] || die "needs root"
  command -v slurmctld >/dev/null && command -v munged >/dev/null || die "slurm-wlm and munge are not installed"
  mkdir -m 0755 "$dir"
  mkdir -m 0755 "$dir"/{etc,etc/shipped,bin,log,run,ctld,spool,spool/node1,spool/node2,spool/node3,munge}
  mkdir -m 1777 "$dir/pids"  # the ranks (tests/slurm/rank.sh) write their PIDs here
  # Copies any user can run: the build tree may be closed to other users (CI's 0700 checkout).
  cp "$build/src/gpureap" "$build/sim/gpusim" "$build/sim/gpusim-cuda" "$build/sim/gpusim-drm-client" \
     "$build/src/gpureap-http.so" "$build/sim/drivers/r550/libnvidia-ml.so.1" "$build/sim/cuda/libcuda.so.1" \
     "$source"/tests/slurm/{rank,node-sim}.sh "$dir/bin/"
  cp "$source"/deploy/slurm/{prolog,epilog,healthcheck}.sh "$dir/etc/shipped/"
  for node in "${nvidia_nodes[@]}"; do
    mkdir -m 0755 "$dir/$node"
    GPUSIM_STATE_DIR=$dir/$node/sim "$dir/bin/gpusim" init --gpus 2 --memory 80GiB >/dev/null
    [[ -c $dir/$node/sim/dev/nvidia0 ]] || die "gpusim made no character devices (slurmd takes no other GRES file)"
  done
  # node3: no NVIDIA GPU (no nvidia<N> node) and no NVIDIA library; one AMD GPU with ROCm (KFD),
  # whose driver runs until stop (its parent, a shell left waiting, must outlive this script).
  mkdir -m 0755 "$dir/node3"
  GPUSIM_STATE_DIR=$dir/node3/sim "$dir/bin/gpusim" init --gpus 0 >/dev/null
  "$dir/bin/gpusim" --state "$dir/node3/sim" drm-add --pci "$amd_pci" --kfd >/dev/null
  mknod -m 0666 "$dir/node3/gres-renderD128" c 1 3
  setsid sh -c '"$0" drm-driver --state "$1" & echo $! >"$2"; wait' \
    "$dir/bin/gpusim" "$dir/node3/sim" "$dir/run/drm-driver.pid" </dev/null >>"$dir/log/drm-driver.log" 2>&1 &
  cat >"$dir/node3/gpureap.env" <<EOF
export GPUREAP_NVML_LIBRARY=$dir/node3/no-libnvidia-ml.so.1
export GPUREAP_SYS_DIR=$dir/node3/sim/sys GPUREAP_FDINFO_DIR=$dir/node3/sim/fdinfo
EOF
  write_slurm_conf "$dir"
  for name in prolog epilog healthcheck; do write_wrapper "$dir" "$name"; done
  cat >"$dir/env" <<EOF
export SLURM_CONF=$dir/etc/slurm.conf CLUSTER_DIR=$dir
export GPUREAP_NVML_LIBRARY=$dir/bin/libnvidia-ml.so.1 GPUREAP=$dir/bin/gpureap
EOF

  # munge: a key of its own and a socket in DIR; munged runs as root here.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"

  ip link add "$bridge" type bridge
  ip addr add "$net.1/24" dev "$bridge"
  ip link set "$bridge" up
  local i=2
  for node in "${nodes[@]}"; do
    local ns
    ns=$(netns_name "$node")
    ip netns add "$ns"
    ip link add "gr21-$node" type veth peer name eth0 netns "$ns"
    ip link set "gr21-$node" master "$bridge" up
    ip -n "$ns" addr add "$net.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    i=$((i + 1))
  done

  export SLURM_CONF=$dir/etc/slurm.conf
  # Its own hostname too: slurmctld starts only on the host SlurmctldHost names.
  unshare --uts /bin/sh -c 'hostname ctld && exec slurmctld -f "$1" -i' sh "$SLURM_CONF"
  for node in "${nodes[@]}"; do
    # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup hierarchies.
    nsenter --net="/run/netns/$(netns_name "$node")" unshare --uts \
      /bin/sh -c 'hostname "$1" && exec slurmd -f "$2" -N "$1"' sh "$node" "$SLURM_CONF"
  done
  wait_for 30 "both nodes idle (see $dir/log)" nodes_idle
}

stop() {
  local dir=$1
  export SLURM_CONF=$dir/etc/slurm.conf
  [[ -f $SLURM_CONF ]] && timeout 5 scancel --full --quiet --partition=gpu 2>/dev/null || true
  # All daemons at once; then SIGKILL whatever still runs after 3 s. A zombie counts as ended:
  # the daemons' parent is PID 1, which may be slow to reap.
  local pidfile pid pids=()
  for pidfile in "$dir"/run/slurmd-*.pid "$dir/run/slurmctld.pid" "$dir/run/munged.pid" "$dir/run/drm-driver.pid"; do
    [[ -f $pidfile ]] || continue
    pid=$(<"$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] && kill "$pid" 2>/dev/null && pids+=("$pid")
  done
  running() { local p; for p; do [[ -e /proc/$p && $(sed 's/.*) \(.\).*/\1/' "/proc/$p/stat") != Z ]] && return 0; done; return 1; }
  for _ in $(seq 30); do running "${pids[@]}" || break; sleep 0.1; done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  # What the daemons started and left (a job's slurmstepd, when the daemons were killed before
  # it ended): whatever works in DIR, which only this cluster uses.
  local proc cwd
  for proc in /proc/[0-9]*; do
    cwd=$(readlink "$proc/cwd" 2>/dev/null) || continue
    [[ $cwd == "$dir"/* || $cwd == "$dir" ]] && [[ ${proc#/proc/} != "$$" ]] && { kill -KILL "${proc#/proc/}" 2>/dev/null || true; }
  done
  for node in "${nodes[@]}"; do
    ip netns del "$(netns_name "$node")" 2>/dev/null || true
    ip link del "gr21-$node" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  [[ $dir == /tmp/* ]] && rm -rf "$dir"
  return 0
}

case ${1:-} in
  start)
    [[ $# == 4 ]] || die "usage: cluster.sh start DIR SOURCE_DIR BUILD_DIR"
    [[ ! -e $2 ]] || die "$2 exists"
    # A start that fails leaves nothing running (its logs are copied to stderr first).
    trap 'status=$?; if ((status != 0)); then tail -n 20 "$2"/log/*.log >&2 2>/dev/null; stop "$2"; fi' EXIT
    start "$2" "$3" "$4" ;;
  stop) [[ $# == 2 ]] || die "usage: cluster.sh stop DIR"; stop "$2" ;;
  *) die "usage: cluster.sh start DIR SOURCE_DIR BUILD_DIR | stop DIR" ;;
esac
