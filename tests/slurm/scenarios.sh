#!/usr/bin/env bash
# The shipped deploy/slurm scripts and `gpureap run` inside a real three-node Slurm cluster
# (tests/slurm/cluster.sh, started once for all scenarios): jobs submitted with sbatch/srun by
# normal users, and what Slurm (scontrol, sinfo, the job completion log) and the GPUs show after.
# Usage: scenarios.sh SOURCE_DIR BUILD_DIR. Exit 77 (skipped) without root or without Slurm.
set -euo pipefail
source=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
if [[ $(id -u) != 0 ]]; then echo "skipped: the cluster needs root (network namespaces, slurmd)"; exit 77; fi
for program in slurmctld slurmd munged sbatch; do
  command -v "$program" >/dev/null || { echo "skipped: no $program (scripts/setup-deps.sh installs slurm-wlm and munge)"; exit 77; }
done
# The integration tests' user, made as they make it (under their lock) when this runs first.
user_a=gpureap-test-user
(
  flock 8
  id "$user_a" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user_a"
) 8>/run/lock/gpureap-test-user.lock

# One cluster at a time on this machine: its bridge, namespaces and ports are fixed. The lock is
# held by a flock process that runs this script again and waits for it, its descriptor closed
# (-o) for the run: no daemon the run starts inherits it, so a run killed midway leaves it free
# and the next run, under the lock, stops what it left (a cluster directory that exists).
lock=/run/lock/gpureap-slurm-cluster.lock
if [[ ${GPUREAP_SLURM_CLUSTER_LOCKED:-} != "$lock" ]]; then
  status=0
  GPUREAP_SLURM_CLUSTER_LOCKED=$lock flock -o -w 120 -E 75 "$lock" bash "$0" "$@" || status=$?
  ((status != 75)) || echo "another run of the Slurm scenarios holds $lock"
  exit "$status"
fi
for stale in /tmp/gpureap-slurm-[0-9]*; do
  [[ -d $stale ]] && bash "$source/tests/slurm/cluster.sh" stop "$stale"
done
bash "$source/tests/slurm/cluster.sh" stop /tmp/gpureap-slurm-none  # its network, if left

dir=/tmp/gpureap-slurm-$$
user_b=gpureap-slurm-b$$  # the second user of the two-users scenario, removed at the end
frozen_group=/sys/fs/cgroup/freezer/gpureap-slurm-$$
failures=0
cleanup() {
  local status=$?
  # The daemons' logs and the ranks' output say why a job did not start or end.
  ((status == 0 && failures == 0)) || tail -n 40 "$dir"/log/slurm*.log "$dir"/pids/* 2>/dev/null
  [[ -d $frozen_group ]] && { echo THAWED >"$frozen_group/freezer.state"; rmdir "$frozen_group" 2>/dev/null || true; }
  # Whatever a scenario left (a failure midway) is ended by PID from the READY files, which only
  # this run's ranks wrote.
  local pid
  for pid in $(sed -n 's/.*pid=\([0-9]*\).*workers=\([0-9,]*\).*/\1,\2/p' "$dir"/pids/* 2>/dev/null | tr ',' ' '); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  # The fleet scenario's exporters and Prometheus, if it stopped midway.
  [[ -n ${exporters:-} ]] && { kill $exporters 2>/dev/null || true; }
  [[ -n ${prometheus_pid:-} ]] && { kill "$prometheus_pid" 2>/dev/null || true; }
  bash "$source/tests/slurm/cluster.sh" stop "$dir"
  userdel "$user_b" 2>/dev/null || true
}
trap cleanup EXIT

fail() { printf 'FAIL (%s s): %s\n' "$((SECONDS - scenario_started))" "$*"; failures=$((failures + 1)); }
scenario_started=$SECONDS
check() {  # check WHAT COMMAND...: the command must succeed
  local what=$1
  shift
  if "$@"; then printf 'ok (%s s): %s\n' "$((SECONDS - scenario_started))" "$what"; else fail "$what"; fi
}
eventually() {  # eventually SECONDS COMMAND...: true once the command succeeds
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

started=$SECONDS
bash "$source/tests/slurm/cluster.sh" start "$dir" "$source" "$build"
echo "cluster up in $((SECONDS - started)) s"
# shellcheck source=/dev/null
source "$dir/env"
useradd --system --no-create-home --shell /usr/sbin/nologin "$user_b"

as() { local user=$1; shift; runuser -u "$user" -- env SLURM_CONF="$SLURM_CONF" CLUSTER_DIR="$CLUSTER_DIR" "$@"; }
submit() {  # submit USER SBATCH_ARGS... : the job's ID
  local user=$1
  shift
  as "$user" sbatch --parsable --no-requeue -D /tmp -o /dev/null "$@"
}
node_state() { scontrol show node "$1" | sed -n 's/^ *State=\([^ ]*\).*/\1/p'; }
node_reason() { scontrol show node "$1" | sed -n 's/^ *Reason=//p'; }
node_is() { [[ $(node_state "$1") == "$2" ]]; }
job_field() { scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
job_is() { [[ $(job_field "$1" JobState) == "$2" ]]; }
completed() { grep -q "^JobId=$1 .*JobState=$2 " "$dir/log/jobcomp.txt" 2>/dev/null; }
# A GPU's used memory as the node's simulated driver reports it.
gpu_used() { "$dir/bin/gpusim" --state "$dir/$1/sim" status --json | jq ".gpus[$2].memory.used"; }
gpu_at() { [[ $(gpu_used "$1" "$2") == "$3" ]]; }
ready() { [[ -s $dir/pids/$1 ]]; }  # its READY line (not the .err file beside it)
pid_of() { sed -n 's/.*READY pid=\([0-9]*\).*/\1/p' "$dir/pids/$1"; }
workers_of() { sed -n 's/.*workers=\([0-9,]*\).*/\1/p' "$dir/pids/$1" | tr ',' ' '; }
# A zombie counts as gone: this machine's PID 1 may be slow to reap the orphans it inherits.
state_of() { sed -n 's/^[0-9]* (.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null; }
alive() { local pid s; for pid; do s=$(state_of "$pid"); [[ -n $s && $s != Z ]] || return 1; done; }
gone() { local pid s; for pid; do s=$(state_of "$pid"); [[ -z $s || $s == Z ]] || return 1; done; }
job_gpu() {  # the GPU index Slurm gave job $1 on its node
  scontrol show job -d "$1" | sed -n 's/.*GRES=gpu:[0-9]*(IDX:\([0-9]*\)).*/\1/p' | head -1
}

declare -A baseline
for node in node1 node2; do
  for gpu in 0 1; do baseline[$node.$gpu]=$(gpu_used "$node" "$gpu"); done
done
gpus_at_baseline() {
  local node gpu
  for node in "$@"; do
    for gpu in 0 1; do gpu_at "$node" "$gpu" "${baseline[$node.$gpu]}" || return 1; done
  done
}

scenario() { printf '\n== %s\n' "$*"; scenario_started=$SECONDS; }
# After a prolog refused job JOB on NODE for LEFTOVER: the leftover ends, the job goes, the node
# is resumed and must be idle.
resume_after_refusal() {
  local node=$1 leftover=$2 job=$3
  kill "$leftover"
  eventually 5 gone "$leftover"
  scancel "$job" 2>/dev/null || true
  scontrol update NodeName="$node" State=RESUME
  check "resumed, $node is idle" eventually 10 node_is "$node" IDLE
}
scenario_took() { printf 'took %s s\n' "$((SECONDS - scenario_started))"; }

# ---------------------------------------------------------------------------------------------
# Under proctrack/cgroup Slurm itself ends what stays in the job's cgroup (the forked workers);
# the loader is moved out of it first, as a process of the job's user started outside the job's
# cgroup is (over ssh without pam_slurm_adopt, a systemd --user service): the epilog ends that.
scenario "a job leaves forked DataLoader workers and a loader outside its cgroup; the epilog ends what Slurm did not, a second user's job on the other GPU survives"
bystander=$(submit "$user_b" -w node1 --gres=gpu:1 --wrap "exec $dir/bin/rank.sh bystander")
ended=$(submit "$user_a" -w node1 --gres=gpu:1 --wrap "exec $dir/bin/rank.sh ended --exit-after 3000")
eventually 30 ready "ended-node1-0.loader" || fail "the job did not start"
escaped=$(pid_of ended-node1-0.loader)
[[ -n $escaped ]] && echo "$escaped" >/sys/fs/cgroup/freezer/cgroup.procs  # before the rank exits, 3 s after its start
eventually 30 ready "ended-node1-0" || fail "the job's rank did not start"
eventually 30 ready "bystander-node1-0" || fail "the bystander job did not start"
ended_gpu=$(job_gpu "$ended") bystander_gpu=$(job_gpu "$bystander")
check "the two jobs have different GPUs ($ended_gpu, $bystander_gpu)" test "$ended_gpu" != "$bystander_gpu"
leftovers="$(workers_of ended-node1-0) $escaped"
bystanders="$(pid_of bystander-node1-0) $(workers_of bystander-node1-0) $(pid_of bystander-node1-0.loader)"
bystander_used=$(gpu_used node1 "$bystander_gpu")
check "job $ended ended with exit code 0 (job completion log)" eventually 10 completed "$ended" COMPLETED
check "node1 back to mixed: the epilog passed" eventually 10 node_is node1 MIXED
check "the job's workers and loader ($leftovers) are gone" gone $leftovers
check "node1's GPU $ended_gpu is back to its baseline" gpu_at node1 "$ended_gpu" "${baseline[node1.$ended_gpu]-unknown}"
check "the other user's job ($bystanders) still runs" alive $bystanders
check "the other user's GPU $bystander_gpu still holds its memory" gpu_at node1 "$bystander_gpu" "$bystander_used"
check "the epilog ended the loader outside the job's cgroup (its audit log)" grep -q "\"pid\":$escaped," "$dir/log/reap-node1.log"
scancel "$bystander"
check "the bystander job, cancelled, is cleaned in turn: node1 idle" eventually 15 node_is node1 IDLE
check "node1's GPUs are back to their baseline" gpus_at_baseline node1
check "and the bystander's processes are gone" gone $bystanders
scenario_took

# ---------------------------------------------------------------------------------------------
scenario "a process that cannot be ended (D state): the epilog fails and the node is drained with gpureap's reason"
stuck=$(submit "$user_a" -w node2 --gres=gpu:1 --wrap "exec $dir/bin/rank.sh stuck")
eventually 30 ready "stuck-node2-0.loader" || fail "the job did not start"
eventually 30 ready "stuck-node2-0" || fail "the job did not start"
loader=$(pid_of stuck-node2-0.loader)
mkdir "$frozen_group"
[[ -n $loader ]] && echo "$loader" >"$frozen_group/cgroup.procs"
echo FROZEN >"$frozen_group/freezer.state"
eventually 5 eval '[[ $(state_of "$loader") == D ]]' || fail "the loader is not in D"
scancel "$stuck"
check "node2 is drained" eventually 20 bash -c '[[ $(scontrol show node node2) == *DRAIN* ]]'
reason=$(node_reason node2)
echo "node2's reason: $reason"
check "the reason is gpureap's and names the survivor ($loader)" bash -c '[[ $0 == *gpureap* && $0 == *"$1"* ]]' "$reason" "$loader"
echo THAWED >"$frozen_group/freezer.state"
check "thawed, the loader ends (its SIGKILL was pending)" eventually 5 gone "$loader"
echo "$loader" >/sys/fs/cgroup/freezer/cgroup.procs 2>/dev/null || true
rmdir "$frozen_group"
scontrol update NodeName=node2 State=RESUME
check "resumed, node2 is idle" eventually 10 node_is node2 IDLE
check "node2's GPUs are back to their baseline" gpus_at_baseline node2
scenario_took

# ---------------------------------------------------------------------------------------------
scenario "the prolog refuses a GPU that still holds memory and says why"
GPUSIM_STATE_DIR=$dir/node2/sim "$dir/bin/gpusim-cuda" --alloc 0:3GiB --alloc 1:3GiB --name leftover \
  >"$dir/pids/leftover" </dev/null &
eventually 5 ready leftover || fail "the leftover did not start"
leftover=$(pid_of leftover)
refused=$(submit "$user_a" -w node2 --gres=gpu:1 --wrap "exec $dir/bin/rank.sh refused")
check "node2 is drained" eventually 15 bash -c '[[ $(scontrol show node node2) == *DRAIN* ]]'
reason=$(node_reason node2)
echo "node2's reason: $reason"
check "the job never ran" test ! -e "$dir/pids/refused-node2-0"
check "the leftover the prolog saw still runs (a prolog only looks)" alive "$leftover"
check "the reason is gpureap's and names the GPU and the leftover ($leftover)" \
  bash -c '[[ $0 == "gpureap prolog: job $1: GPU "[01]": 3072 MiB used; processes: $2 (root)"* ]]' "$reason" "$refused" "$leftover"
check "slurmd's log has the prolog's words too" grep -q "not starting: GPU [01]: .*$leftover (root)" "$dir/log/slurmd-node2.log"
resume_after_refusal node2 "$leftover" "$refused"
scenario_took

# ---------------------------------------------------------------------------------------------
# node3 has one AMD GPU (the simulator's DRM driver, ROCm's KFD) and no NVIDIA GPU or library.
scenario "an AMD-only node: its health check, prolog and epilog pass; a killed ROCm job's worker that keeps its KFD context is ended by the epilog; the prolog refuses a job while a process holds the GPU"
amd=$dir/node3/sim
check "node3 joined idle: no NVIDIA library there is no fault" node_is node3 IDLE
check "node3's health check (gpureap doctor) passes" env SLURMD_NODENAME=node3 "$dir/etc/gpureap-healthcheck.sh"
rocm=$(submit "$user_a" -w node3 --gres=gpu:1 --wrap \
  "exec $dir/bin/gpusim-drm-client --state $amd --node renderD128 --vram 2GiB --kfd --workers 1 >$dir/pids/rocm-node3-0")
eventually 30 ready rocm-node3-0 || fail "the ROCm job did not start"
rocm_root=$(pid_of rocm-node3-0) rocm_worker=$(workers_of rocm-node3-0)
# The kernel makes the KFD process within the open of /dev/kfd; the simulated driver shows it at
# its next cycle: killed before that, the job would leave no KFD context for the epilog to see.
eventually 10 test -e "$amd/sys/class/kfd/kfd/proc/$rocm_root" || fail "the ROCm job's KFD context never showed"
# The worker leaves the job's cgroup (as a helper started outside the job does): Slurm ends the
# job's root, and the worker keeps the root's /dev/kfd, render client and KFD context.
[[ -n $rocm_worker ]] && echo "$rocm_worker" >/sys/fs/cgroup/freezer/cgroup.procs
scancel "$rocm"
check "the ROCm job's root ($rocm_root) is gone" eventually 15 gone "$rocm_root"
check "node3 back to idle: the epilog passed" eventually 20 node_is node3 IDLE
check "the worker that kept the dead job's KFD context ($rocm_worker) is gone" gone $rocm_worker
check "the job's KFD context is gone" test ! -e "$amd/sys/class/kfd/kfd/proc/$rocm_root"
check "the epilog ended the worker (its audit log)" grep -q "\"pid\":$rocm_worker," "$dir/log/reap-node3.log"
"$dir/bin/gpusim-drm-client" --state "$amd" --node renderD128 --vram 3GiB --kfd >"$dir/pids/leftover-node3" </dev/null &
eventually 5 ready leftover-node3 || fail "the AMD leftover did not start"
amd_leftover=$(pid_of leftover-node3)
refused=$(submit "$user_a" -w node3 --gres=gpu:1 --wrap "exec sleep 1")
check "node3 is drained" eventually 15 bash -c '[[ $(scontrol show node node3) == *DRAIN* ]]'
reason=$(node_reason node3)
echo "node3's reason: $reason"
check "the reason names the AMD GPU and the leftover ($amd_leftover)" \
  bash -c '[[ $0 == "gpureap prolog: job $1: GPU 0000:c1:00.0: "*"processes: "*"$2"* ]]' "$reason" "$refused" "$amd_leftover"
resume_after_refusal node3 "$amd_leftover" "$refused"
scenario_took

# ---------------------------------------------------------------------------------------------
# Multi-node fail-fast: every rank under `gpureap run --fail-fast`, two ranks a node, srun's
# --kill-on-bad-exit. One process of node1 is killed; gpureap on node1 ends its part of the job
# and exits with the dead process's status, Slurm ends the step on node2, gpureap there ends its
# ranks and workers on that signal; both nodes' GPUs are verified free.
all_ready() { local f; for f in "$@"; do ready "$f" || return 1; done; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
launch() {  # launch TAG VICTIM_KIND(rank|loader) SRUN_OPTIONS... -- [gpureap run...]: sets srun_pid, job_pids, victim
  local tag=$1 kind=$2
  shift 2
  local srun_options=()
  while [[ $1 != -- ]]; do srun_options+=("$1"); shift; done
  shift
  local files=() node rank f
  for node in node1 node2; do for rank in 0 1; do files+=("$tag-$node-$rank" "$tag-$node-$rank.loader"); done; done
  as "$user_a" srun -N2 --ntasks-per-node=2 --gres=gpu:2 "${srun_options[@]}" \
    "$dir/bin/node-sim.sh" "$@" "$dir/bin/rank.sh" "$tag" >"$dir/log/$tag.out" 2>&1 &
  srun_pid=$!
  eventually 30 all_ready "${files[@]}" || { fail "the job's ranks did not start"; return 1; }
  job_pids=""
  for f in "${files[@]}"; do job_pids+=" $(pid_of "$f") $(workers_of "$f")"; done
  victim=$(pid_of "$tag-node1-0$([[ $kind == loader ]] && echo .loader)")
}
fail_fast() {  # fail_fast TAG VICTIM_KIND [gpureap run...]
  local tag=$1 kind=$2
  shift 2
  launch "$tag" "$kind" --kill-on-bad-exit=1 -- "$@" || return
  # gpureap run counts an orphan's death only once a look (--poll-interval) saw it use a GPU: a
  # loader killed before that is not a process that used a GPU to it.
  [[ $kind == loader ]] && sleep 1
  local killed_at
  killed_at=$(now)
  kill -KILL "$victim"
  eventually 15 gpus_at_baseline node1 node2 || fail "the GPUs were not freed"
  echo "measured: $kind $victim killed: both nodes' GPUs back to baseline after $(since "$killed_at") s"
  local status=0
  eventually 20 gone "$srun_pid" || { fail "srun still runs 20 s after the death"; kill "$srun_pid"; }
  wait "$srun_pid" || status=$?
  echo "srun exited $status after $(since "$killed_at") s"
  check "srun says the job failed" test "$status" != 0
  check "every rank, worker and loader on both nodes is gone" eventually 5 gone $job_pids
  check "the NVML client beside the job (root's, outside Slurm) still runs" alive $nvml_clients
  check "both nodes idle again" eventually 15 eval 'node_is node1 IDLE && node_is node2 IDLE'
}
held_after() {  # held_after SECONDS TAG VICTIM_KIND SRUN_OPTIONS...: what still holds the GPUs then
  local seconds=$1 tag=$2 kind=$3
  shift 3
  launch "$tag" "$kind" "$@" -- || return
  kill -KILL "$victim"
  sleep "$seconds"
  local held=0 p
  for p in $job_pids; do alive "$p" && held=$((held + 1)); done
  echo "measured: $kind $victim killed, $seconds s later: $held of the job's processes still run;" \
    "used: node1 $(gpu_used node1 0)+$(gpu_used node1 1), node2 $(gpu_used node2 0)+$(gpu_used node2 1) bytes"
  scancel --jobname=node-sim.sh --user="$user_a"
  wait "$srun_pid" || true
  eventually 15 eval 'node_is node1 IDLE && node_is node2 IDLE' || fail "the nodes did not come back"
}
scenario "multi-node fail-fast: a rank on node1 is killed"
nvml_clients=""
for node in node1 node2; do
  GPUSIM_STATE_DIR=$dir/$node/sim "$dir/bin/gpusim-cuda" --nvml-client --name exporter >"$dir/pids/nvml-$node" </dev/null &
  eventually 5 ready "nvml-$node" || fail "the NVML client did not start"
  nvml_clients+=" $(pid_of "nvml-$node")"
done
fail_fast ff-rank rank "$GPUREAP" run --fail-fast --poll-interval 100ms --kill-timeout 1s --verify-timeout 2s
check "gpureap run on node1 exited with the rank's status (137)" grep -q "node1: task 0: Exited with exit code 137" "$dir/log/ff-rank.out"
check "gpureap run on node1 verified its GPU" grep -q "the job's memory was verified released" "$dir/log/ff-rank.out"
scenario_took

scenario "multi-node fail-fast: one double-forked worker (the loader) of a rank on node1 is killed"
fail_fast ff-loader loader "$GPUREAP" run --fail-fast --poll-interval 100ms --kill-timeout 1s --verify-timeout 2s
check "gpureap run on node1 said which process ended the job" \
  grep -q -- "--fail-fast: PID [0-9]* (loader), which used a GPU, was killed by SIGKILL: ending the job" "$dir/log/ff-loader.out"
check "and exited 137" grep -q "node1: task 0: Exited with exit code 137" "$dir/log/ff-loader.out"
scenario_took

# ---------------------------------------------------------------------------------------------
# The cluster through `gpureap fleet`: each node's `gpureap export --per-process` in the node's
# network namespace, on the node's address, scraped every second by a Prometheus on the host; a
# two-node job's memory is shown under its ranks while it runs, and none of it after.
readonly prometheus_port=6919 net=10.213.21
fleet_json() { "$GPUREAP" fleet --prometheus "http://127.0.0.1:$prometheus_port" --top 10 --json 2>/dev/null; }
fleet_shows_pid() {  # fleet_shows_pid NODE_INDEX PID USER: a top process of that host's GPUs
  fleet_json | jq -e --arg i "$net.$(($1 + 1)):9874" --argjson p "$2" --arg u "$3" \
    '[.hosts[] | select(.instance == $i and .scrape == "up") | .gpus[].top_processes[] | select(.pid == $p and .user == $u)] | length == 1' >/dev/null
}
fleet_host_used() {  # fleet_host_used NODE_INDEX: the bytes used on that host's GPUs, as fleet shows them
  fleet_json | jq --arg i "$net.$(($1 + 1)):9874" '[.hosts[] | select(.instance == $i) | .gpus[].memory.used_bytes] | add'
}
fleet_host_at() { [[ $(fleet_host_used "$1") == "$2" ]]; }
fleet_shows_no_user() {  # fleet_shows_no_user USER: none of that user's processes on any host
  fleet_json | jq -e --arg u "$1" '[.hosts[].gpus[].top_processes[] | select(.user == $u)] | length == 0' >/dev/null
}
if command -v prometheus >/dev/null; then
  scenario "gpureap fleet over a Prometheus scraping both nodes' exporters: the job's memory while it runs, none after"
  exporters=""
  for i in 1 2; do
    nsenter --net="/run/netns/gr21-node$i" env GPUSIM_STATE_DIR="$dir/node$i/sim" GPUREAP_DEV_DIR="$dir/node$i/sim/dev" \
      ASAN_OPTIONS=detect_leaks=0 "$GPUREAP" export --listen "$net.$((i + 1)):9874" --per-process \
      >"$dir/log/export-node$i.log" 2>&1 &
    exporters+=" $!"
  done
  mkdir "$dir/prometheus"
  printf '%s\n' "global: {scrape_interval: 1s, evaluation_interval: 1s}" "scrape_configs:" \
    "  - job_name: gpureap" "    static_configs: [{targets: ['$net.2:9874', '$net.3:9874']}]" >"$dir/prometheus/prometheus.yml"
  prometheus --config.file="$dir/prometheus/prometheus.yml" --storage.tsdb.path="$dir/prometheus/data" \
    --web.listen-address="127.0.0.1:$prometheus_port" --log.level=warn >"$dir/log/prometheus.log" 2>&1 &
  prometheus_pid=$!
  baseline_used() { echo $((baseline[node$1.0] + baseline[node$1.1])); }
  check "fleet shows both nodes up, at their baseline" \
    eventually 30 eval 'fleet_host_at 1 "$(baseline_used 1)" && fleet_host_at 2 "$(baseline_used 2)"'
  as "$user_a" srun -N2 -w node1,node2 --ntasks-per-node=1 --gres=gpu:1 "$dir/bin/rank.sh" fleet >"$dir/log/fleet.out" 2>&1 &
  srun_pid=$!
  eventually 30 all_ready fleet-node1-0 fleet-node2-0 fleet-node1-0.loader fleet-node2-0.loader ||
    fail "the job's ranks did not start"
  job_pids="$(pid_of fleet-node1-0) $(pid_of fleet-node2-0) $(pid_of fleet-node1-0.loader) $(pid_of fleet-node2-0.loader)"
  job_pids+=" $(workers_of fleet-node1-0) $(workers_of fleet-node2-0)"
  for i in 1 2; do
    check "fleet shows node$i's rank $(pid_of "fleet-node$i-0") and loader as $user_a's" \
      eventually 15 eval 'fleet_shows_pid $i "$(pid_of fleet-node$i-0)" "$user_a" && fleet_shows_pid $i "$(pid_of fleet-node$i-0.loader)" "$user_a"'
    check "fleet's node$i memory is the job's 3 GiB above the baseline" \
      eventually 5 fleet_host_at "$i" "$(($(baseline_used "$i") + 3 * 1024 * 1024 * 1024))"
  done
  scancel --user="$user_a" --jobname=rank.sh
  wait "$srun_pid" || true
  check "the job's processes on both nodes are gone" eventually 15 gone $job_pids
  check "fleet shows both nodes back at their baseline" \
    eventually 15 eval 'fleet_host_at 1 "$(baseline_used 1)" && fleet_host_at 2 "$(baseline_used 2)"'
  check "and no process of $user_a on any host" fleet_shows_no_user "$user_a"
  kill $exporters "$prometheus_pid"
  wait $exporters "$prometheus_pid" 2>/dev/null || true
  check "both nodes idle again" eventually 15 eval 'node_is node1 IDLE && node_is node2 IDLE'
  scenario_took
else
  echo "skipped the fleet scenario: no prometheus (Debian package prometheus; scripts/setup-deps.sh)"
fi

if [[ ${GPUREAP_SLURM_COMPARE:-0} == 1 ]]; then
  # The same job without gpureap run (docs/performance.md): seconds of waiting, not for CI.
  scenario "without gpureap run, --kill-on-bad-exit=1, a rank killed"
  fail_fast plain rank
  scenario "without gpureap run, --kill-on-bad-exit=1, a loader killed"
  held_after 10 plain-loader loader --kill-on-bad-exit=1
  scenario "without gpureap run, Slurm's default KillOnBadExit=0, a rank killed"
  held_after 10 plain-default rank
fi
kill $nvml_clients

if ((failures > 0)); then
  echo "$failures check(s) failed; logs:"
  tail -n 40 "$dir"/log/slurm*.log "$dir"/log/*.out
  exit 1
fi
echo "all Slurm scenarios passed in $((SECONDS - started)) s"
