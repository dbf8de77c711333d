# The simulated host the benchmarks share, sourced by them (not run): 8 simulated GPUs (r550,
# 80 GiB each) in a private state directory, GPU processes started one process group per GPU,
# and as many other (sleeping) processes as a benchmark asks for. Everything started here is
# killed at exit, by process group, with whatever the benchmark registered.
#
#   source "$root/bench/sim_host.sh"
#   sim_host_need_pids 2000               # before starting: exits if pid_max is too low
#   sim_host_begin                         # $state, the simulator's environment, 8 GPUs
#   sim_host_gpu_processes 8 --alloc 2GiB  # 8 processes on each GPU, 2 GiB each; waits for READY
#   sim_host_grow_others 2000              # up to 2,000 other processes (call again to grow)
#   sim_host_kill_at_exit "$pid"           # a daemon of the benchmark's, ended at exit
#   sim_host_at_exit my_function           # a function of the benchmark's, called at exit
#   sim_host_watch_policy FILE             # the watch policy of the watch benchmarks
#   sim_host_serving_url ERR_FILE [SCHEME]  # $url once a `gpureap export` says where it serves
# Needs $build (the build directory). `--alloc SIZE` is given without the GPU: each process gets
# its GPU's index prepended.

sim_host_pgids=()
sim_host_pids=()
sim_host_exit_functions=()
sim_host_others=0

sim_host_cleanup() {
  local f p g
  for f in "${sim_host_exit_functions[@]}"; do "$f" || true; done
  for p in "${sim_host_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for g in "${sim_host_pgids[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${state:-}" ] && rm -rf "$state"
}

sim_host_kill_at_exit() { sim_host_pids+=("$1"); }
sim_host_at_exit() { sim_host_exit_functions+=("$1"); }

# Sets $state and the environment every gpureap, gpusim and nvidia-smi run of the benchmark uses.
sim_host_begin() {
  state=$(mktemp -d /tmp/gpureap-bench-XXXXXX)
  trap sim_host_cleanup EXIT
  export GPUSIM_STATE_DIR="$state" GPUREAP_DEV_DIR="$state/dev" NO_COLOR=1
  export GPUREAP_NVML_LIBRARY="$build/sim/drivers/r550/libnvidia-ml.so.1"
  "$build/sim/gpusim" init --gpus 8 --memory 80GiB >/dev/null
}

# sim_host_gpu_processes PER_GPU --alloc SIZE [gpusim-cuda options...]
sim_host_gpu_processes() {
  local per_gpu=$1 gpu i n
  shift
  [ "$1" = --alloc ] || { echo "bench: sim_host_gpu_processes PER_GPU --alloc SIZE [options]" >&2; exit 2; }
  local size=$2
  shift 2
  for gpu in 0 1 2 3 4 5 6 7; do
    # The arguments reach the processes as bash's positional parameters, never as script text.
    setsid bash -c 'n=$1; shift; for ((i = 0; i < n; i++)); do "$@" & done; wait' \
      sim-host "$per_gpu" "$build/sim/gpusim-cuda" --alloc "$gpu:$size" "$@" \
      </dev/null >"$state/ready.$gpu" 2>&1 &
    sim_host_pgids+=($!)
  done
  for gpu in 0 1 2 3 4 5 6 7; do
    for ((i = 0; i < 400; i++)); do
      n=$(grep -c READY "$state/ready.$gpu" 2>/dev/null || true)
      [ "${n:-0}" -ge "$per_gpu" ] && break
      sleep 0.05
    done
    [ "${n:-0}" -ge "$per_gpu" ] || { echo "bench: GPU $gpu's processes did not start:" >&2; cat "$state/ready.$gpu" >&2; exit 1; }
  done
}

# sim_host_need_pids N: exits unless the kernel allows N other processes beside the host's.
sim_host_need_pids() {
  local pid_max
  pid_max=$(cat /proc/sys/kernel/pid_max)
  [ $(($1 + 1000)) -le "$pid_max" ] ||
    { echo "bench: $1 extra processes need kernel.pid_max above $(($1 + 1000)) (it is $pid_max)" >&2; exit 2; }
}

# sim_host_grow_others N: other processes (sleeps, 3 descriptors each, no GPU file) up to N,
# added in one process group per call.
sim_host_grow_others() {
  local want=$1 add=$(( $1 - sim_host_others )) i n g
  [ "$add" -gt 0 ] || return 0
  sim_host_need_pids "$want"
  setsid bash -c 'for ((i = 0; i < $1; i++)); do sleep 3600 & done; wait' sim-host "$add" </dev/null >/dev/null 2>&1 &
  g=$!
  disown "$g"  # killed by process group at exit, without a job notice
  sim_host_pgids+=("$g")
  for ((i = 0; i < 1200; i++)); do
    n=$(pgrep -c -g "$g" || true)
    [ "${n:-0}" -gt "$add" ] && break
    sleep 0.1
  done
  sim_host_others=$want
}

# sim_host_watch_policy FILE: the seed cleaner's rule as a watch policy (this user's python
# processes over 100 MiB idle for an hour, in dry-run), looking every second and reading all of
# /proc every 60 s (docs/performance.md has the file).
sim_host_watch_policy() {
  cat >"$1" <<EOF
mode = "dry-run"
interval = "1s"
full_scan_interval = "60s"
[[rule]]
name = "stale-python"
condition = "idle"
idle_for = "1h"
users = ["$(id -un)"]
command = "python"
min_memory = "100MiB"
action = "terminate"
grace = "0s"
EOF
}

# sim_host_serving_url ERR_FILE [SCHEME (default http)]: sets $url to where a `gpureap export`
# started with --listen ...:0 serves, from its "serving SCHEME://..." line in ERR_FILE (its
# stderr); exits with that file's text if none comes within 20 s.
sim_host_serving_url() {
  local err=$1 scheme=${2:-http}
  url=""
  for _ in $(seq 1 400); do
    url=$(sed -n "s/.*serving \\($scheme:[^ ]*\\)\$/\\1/p" "$err")
    [ -n "$url" ] && return
    sleep 0.05
  done
  cat "$err" >&2
  echo "bench: the exporter did not start" >&2
  exit 1
}

# Processes on the host now (all of them, not only the benchmark's).
sim_host_process_count() { printf '%s\n' /proc/[0-9]* | wc -l; }
