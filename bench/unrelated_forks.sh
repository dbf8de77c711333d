#!/usr/bin/env bash
# Benchmark: what processes that have nothing to do with a GPU cost `gpureap export` and
# `gpureap watch` when they fork, exec and exit in a loop. With the kernel's events both daemons
# receive every fork, exec and exit on the host (the process-events connector), so this is the
# price of the events on a busy host (a build server, a shell-heavy batch node), and what any
# user can make them pay. The reference is the same two daemons over a quiet window, in one run.
# Setup: 8 simulated GPUs (r550), 64 GPU processes, 100 other processes; an exporter (events on,
# nothing scraping it) and a watch with bench/sim_host.sh's policy. Then SECONDS quiet, then
# SECONDS of LOOPS shell loops of /bin/true. CPU from /proc/<pid>/stat (clock ticks).
# Usage: bench/unrelated_forks.sh [SECONDS (default 30)] [LOOPS (default 2)]
#        GPUREAP_BUILD=<build dir> picks the build (default ./build, built if missing). Root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}
loops=${2:-2}
build=${GPUREAP_BUILD:-$root/build}
for n in "$seconds" "$loops"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench: SECONDS and LOOPS are positive numbers (got '$n')" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "bench: needs root (fanotify and the process-events connector)" >&2; exit 2; }
[ -x "$build/src/gpureap" ] && [ -f "$build/src/gpureap-http.so" ] && [ -x "$build/sim/gpusim-cuda" ] ||
  "$root/scripts/build.sh" release >/dev/null
for tool in curl bc; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not installed" >&2; exit 2; }
done

source "$root/bench/sim_host.sh"
sim_host_need_pids 300
sim_host_begin
sim_host_gpu_processes 8 --alloc 1GiB --name /usr/bin/python3
sim_host_grow_others 100
"$build/src/gpureap" export --listen 127.0.0.1:0 --no-kernel-log </dev/null >/dev/null 2>"$state/export.err" &
exporter=$!
sim_host_kill_at_exit "$exporter"
sim_host_serving_url "$state/export.err"
curl -s -o /dev/null "$url"  # its first collection: from then on it listens
sim_host_watch_policy "$state/policy.toml"
"$build/src/gpureap" watch --policy "$state/policy.toml" 2>"$state/watch.log" &
watcher=$!
sim_host_kill_at_exit "$watcher"
for _ in $(seq 1 400); do grep -q 'event=start' "$state/watch.log" 2>/dev/null && break; sleep 0.05; done
grep -q 'event=start' "$state/watch.log" || { cat "$state/watch.log" >&2; exit 1; }

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
forks() { awk '/^processes/ { print $2 }' /proc/stat; }
hz=$(getconf CLK_TCK)
printf 'host: %s cores, load average %s at the start\n\n' "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %9s %12s %12s\n' "window ($seconds s)" "forks/s" "export %" "watch %"
window() {  # window LABEL [COMMAND...]: the daemons' CPU while COMMAND runs (or a sleep)
  local label=$1
  shift
  local e0 w0 f0 t0 e1 w1 f1 t1 group=""
  e0=$(ticks "$exporter") w0=$(ticks "$watcher") f0=$(forks) t0=$(date +%s.%N)
  if [ $# -gt 0 ]; then
    setsid "$@" </dev/null >/dev/null 2>&1 &  # a group of its own: its loops end with it
    group=$!
  fi
  sleep "$seconds"
  e1=$(ticks "$exporter") w1=$(ticks "$watcher") f1=$(forks) t1=$(date +%s.%N)
  if [ -n "$group" ]; then
    kill -KILL -- "-$group" 2>/dev/null || true
    wait "$group" 2>/dev/null || true
  fi
  awk -v l="$label" -v e=$((e1 - e0)) -v w=$((w1 - w0)) -v f=$((f1 - f0)) -v t="$(echo "$t1 - $t0" | bc)" -v hz="$hz" \
    'BEGIN { printf "%-34s %9.0f %12.3f %12.3f\n", l, f / t, 100 * e / hz / t, 100 * w / hz / t }'
}
window "quiet"
window "$loops loops of /bin/true" bash -c 'for ((i = 0; i < $0; i++)); do (while :; do /bin/true; done) & done; wait' "$loops"
echo
echo "CPU in clock ticks ($hz a second): a window's resolution is $(echo "scale=3; 100 / $hz / $seconds" | bc) % of a core."
