#!/usr/bin/env bash
# Benchmark: what `gpureap watch` costs a host at a 1-second interval, against a cron-style loop
# of the seed's cleaner (bench/seed_cleaner.sh: nvidia-smi + ps per process, in its dry-run
# form) doing the same job at the same interval, side by side in one run.
#
# Setup: 8 simulated GPUs (r550), 64 GPU processes (8 per GPU, 1 GiB each, named python3, idle),
# 2,000 other processes (sleeps). The watch policy is the cleaner's rule: the user's python
# processes over 100 MiB idle for an hour, in dry-run (docs/performance.md has the file); it
# looks every second and reads all of /proc every 60 s (the default is 5 min: this counts one
# full scan per minute against it). Both run for SECONDS at once, under the same load.
# Measured: the CPU time (user + system) of the daemon over the window, after its start-up,
# and of the loop with every process it ran; the daemon's resident memory at the end (VmRSS)
# and at its peak (VmHWM).
# Goals (issue 10): watch under 1 % of one core, under 15 MiB resident.
# Usage: bench/watch_cost.sh [SECONDS (default 60)]
#        GPUREAP_BUILD=<build dir> picks the build (default ./build, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=${GPUREAP_BUILD:-$root/build}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "bench: SECONDS must be a positive number (got '$seconds')" >&2; exit 2; }
[ -x "$build/src/gpureap" ] && [ -x "$build/sim/gpusim-cuda" ] && [ -x "$build/sim/bin/nvidia-smi" ] ||
  "$root/scripts/build.sh" release >/dev/null

source "$root/bench/sim_host.sh"
sim_host_need_pids 2000
sim_host_begin
# 64 GPU processes: 8 idle "python3" jobs of 1 GiB on each GPU, one process group per GPU.
sim_host_gpu_processes 8 --alloc 1GiB --name /usr/bin/python3
# 2,000 other processes.
sim_host_grow_others 2000
listed=$("$build/sim/bin/nvidia-smi" --query-compute-apps=pid --format=csv,noheader | wc -l)
procs=$(sim_host_process_count)

user=$(id -un)
sim_host_watch_policy "$state/policy.toml"

ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
status_kib() { awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/status"; }

printf 'host: %s cores, load average %s; 8 simulated GPUs (r550), %s GPU processes listed, %s processes; %s s\n' \
  "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$listed" "$procs" "$seconds"

# The daemon: started, then measured from its first look on (start-up is reported apart).
"$build/src/gpureap" watch --policy "$state/policy.toml" 2>"$state/watch.log" &
watch_pid=$!
sim_host_kill_at_exit "$watch_pid"
for _ in $(seq 1 400); do grep -q 'event=start' "$state/watch.log" 2>/dev/null && break; sleep 0.05; done
grep -q 'event=start' "$state/watch.log" || { cat "$state/watch.log" >&2; exit 1; }
start_ticks=$(cpu_ticks "$watch_pid")
start_time=$(date +%s.%N)

# The seed's cleaner, as cron would run it but every second: a fresh bash per run, DRY_RUN=1.
cat >"$state/loop.sh" <<EOF
end=\$((SECONDS + $seconds))
runs=0
while [ \$SECONDS -lt \$end ]; do
  PATH="$build/sim/bin:\$PATH" TARGET_USER="$user" DRY_RUN=1 bash "$root/bench/seed_cleaner.sh" >"$state/cleaner.out" 2>&1
  runs=\$((runs + 1))
  sleep 1
done
echo "\$runs" >"$state/cleaner.runs"
EOF
/usr/bin/time -f '%U %S' -o "$state/cleaner.time" bash "$state/loop.sh"

end_ticks=$(cpu_ticks "$watch_pid")
end_time=$(date +%s.%N)
rss=$(status_kib "$watch_pid" VmRSS)
hwm=$(status_kib "$watch_pid" VmHWM)
kill -TERM "$watch_pid"
wait "$watch_pid" || true
found=$(grep -c 'Found potential stale process' "$state/cleaner.out" || true)
looks_noticed=$(grep -c 'event=notice' "$state/watch.log" || true)
full_scans=$(grep -c 'event=scan' "$state/watch.log" || true)
driver_cpu=$(sed -n 's/.*event=stop .*driver_cpu_seconds=\([0-9.]*\).*/\1/p' "$state/watch.log")
looks=$(sed -n 's/.*event=stop .*looks=\([0-9]*\).*/\1/p' "$state/watch.log")

python3 - "$ticks" "$start_ticks" "$end_ticks" "$rss" "$hwm" "$(cat "$state/cleaner.time")" \
  "$(cat "$state/cleaner.runs")" "$seconds" "$found" "$full_scans" "${driver_cpu:-0}" "${looks:-0}" "$start_time" "$end_time" <<'PY'
import sys
ticks, start, end, rss, hwm = (float(x) for x in sys.argv[1:6])
user, system = (float(x) for x in sys.argv[6].split())
runs, seconds, found, scans = int(sys.argv[7]), float(sys.argv[8]), int(sys.argv[9]), int(sys.argv[10])
driver_cpu, looks = float(sys.argv[11]), int(sys.argv[12])
# The window is as long as the cleaner's loop took (its runs can outlast the seconds asked for).
seconds = float(sys.argv[14]) - float(sys.argv[13])
watch_cpu = (end - start) / ticks
seed_cpu = user + system
watch_pct = 100 * watch_cpu / seconds
seed_pct = 100 * seed_cpu / seconds
print(f"\n{'':40} {'CPU s':>7} {'% of a core':>11} {'ms per run':>10}")
print(f"{'gpureap watch, 1 s interval':40} {watch_cpu:>7.2f} {watch_pct:>11.2f} {1000 * watch_cpu / seconds:>10.2f}")
own = max(watch_cpu - driver_cpu, 0.0)
print(f"{'  of which the simulated driver':40} {driver_cpu:>7.2f} {100 * driver_cpu / seconds:>11.2f} {1000 * driver_cpu / seconds:>10.2f}")
print(f"{'  of which gpureap itself':40} {own:>7.2f} {100 * own / seconds:>11.2f} {1000 * own / seconds:>10.2f}")
print(f"{'seed cleaner loop, ' + str(runs) + ' runs':40} {seed_cpu:>7.2f} {seed_pct:>11.2f} {1000 * seed_cpu / max(runs, 1):>10.2f}")
print(f"\nseed/watch CPU: {seed_cpu / watch_cpu:.1f}x" if watch_cpu > 0 else "\nseed/watch CPU: watch used no measurable CPU")
print(f"watch resident memory: {rss / 1024:.1f} MiB at the end, {hwm / 1024:.1f} MiB at its peak")
print(f"watch: {looks} looks, {scans - 1} full scans in the window (plus the one at start); "
      f"the cleaner found {found} processes in its last run and took {seconds / max(runs, 1):.1f} s per run "
      f"in a window of {seconds:.0f} s")
print("the simulated driver: the CPU its NVML calls cost inside the quick looks (thread CPU time around them);")
print("  it lists allocs/ and probes every context's locks on each call, which a real driver's ioctl does not.")
goal_cpu, goal_mem = watch_pct < 1.0, hwm / 1024 < 15
print(f"goals (issue 10): CPU under 1 % of a core -> {'met' if goal_cpu else 'MISSED'}"
      f"{'' if goal_cpu else f' (gpureap itself: {100 * own / seconds:.2f} %)'}; "
      f"resident memory under 15 MiB -> {'met' if goal_mem else 'MISSED'}")
PY
