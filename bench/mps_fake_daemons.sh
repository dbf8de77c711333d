#!/usr/bin/env bash
# Benchmark: what processes posing as MPS control daemons cost a collection. Each fake is what
# the attack in issue 28 used: a process of the user's whose executable is a symlink named
# nvidia-cuda-mps-control to /bin/bash (root's file, no MPS program), the parent of a GPU
# process, stopped (SIGSTOP) so that anything asking it would wait. A collection must neither
# run it nor wait for it: `gpureap export --once` and `gpureap doctor` are timed with four fakes
# and with four parents alike but for their name, in one run.
# Usage: bench/mps_fake_daemons.sh [RUNS (default 20)]
#        GPUREAP_BUILD=<build dir> picks the build (default ./build, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-20}
build=${GPUREAP_BUILD:-$root/build}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "bench: RUNS must be a positive number (got '$runs')" >&2; exit 2; }
[ -x "$build/src/gpureap" ] && [ -x "$build/sim/gpusim-cuda" ] || "$root/scripts/build.sh" release >/dev/null
command -v hyperfine >/dev/null || { echo "bench: hyperfine is not installed (scripts/setup-deps.sh)" >&2; exit 2; }
source "$root/bench/sim_host.sh"
sim_host_begin
sim_host_gpu_processes 2 --alloc 1GiB

measure() {  # measure NAME -> $state/NAME.json
  hyperfine -N -i --style none --warmup 2 --runs "$runs" --export-json "$state/$1.json" \
    -n export "$build/src/gpureap export --once --no-kernel-log" \
    -n doctor "$build/src/gpureap doctor --no-kernel-log" >"$state/$1.log" 2>&1 ||
    { cat "$state/$1.log" >&2; exit 1; }
}

# Four stopped parents of a 512 MiB GPU process each, run through a symlink to /bin/bash called
# `name`, in directories of their own holding a pid file as the attack's did; measured, then
# ended. The baseline is the same with the symlink called `launcher`.
with_parents() {  # with_parents NAME RESULT
  local name=$1 i pids=()
  for i in 1 2 3 4; do
    mkdir -p "$state/$name$i"
    ln -sf /bin/bash "$state/$name$i/$name"
    printf '%s\n' 1 >"$state/$name$i/nvidia-cuda-mps-control.pid"
    setsid "$state/$name$i/$name" -c \
      "\"$build/sim/gpusim-cuda\" --alloc $((i - 1)):512MiB >\"$state/$name$i.ready\" & wait" </dev/null &
    pids+=($!)
  done
  for i in 1 2 3 4; do
    for _ in $(seq 1 200); do grep -q READY "$state/$name$i.ready" 2>/dev/null && break; sleep 0.05; done
    grep -q READY "$state/$name$i.ready" || { echo "bench: $name $i did not start its GPU process" >&2; exit 1; }
  done
  for i in "${pids[@]}"; do kill -STOP "$i"; done
  CUDA_MPS_PIPE_DIRECTORY=$state/${name}1 measure "$2"
  for i in "${pids[@]}"; do kill -KILL -- "-$i"; done
  wait "${pids[@]}" 2>/dev/null || true
}
with_parents launcher without
with_parents nvidia-cuda-mps-control with

mean() { jq -r --arg n "$2" '.results[] | select(.command == $n) | .mean' "$state/$1.json"; }
printf 'host: %s cores, load average %s; 8 simulated GPUs, %s runs each\n' "$(nproc)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$runs"
printf '%-8s %16s %16s %8s %12s\n' command "4 launchers (ms)" "4 fakes (ms)" ratio "added (ms)"
for n in export doctor; do
  a=$(mean without "$n")
  b=$(mean with "$n")
  awk -v n="$n" -v a="$a" -v b="$b" 'BEGIN { printf "%-8s %16.1f %16.1f %8.2f %12.1f\n", n, a * 1000, b * 1000, b / a, (b - a) * 1000 }'
done
