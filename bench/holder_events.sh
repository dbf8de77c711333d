#!/usr/bin/env bash
# Benchmark: the holders kept from the kernel's events (fanotify and the process-events
# connector) against the walk of /proc they replace, side by side in one run: the walk is the
# same binary with GPUREAP_HOLDER_EVENTS=off.
# - open -> visible: a process opens GPU 0's device file; the time until `gpureap export` (its
#   default --cache 1s, scraped back to back) serves it. Goal < 50 ms.
# - fork -> visible: a holder forks a child that opens nothing; the same. Goal < 50 ms.
# - steady state: a fresh scrape (--cache 0) of export, goal < 5 ms; `gpureap watch` at a 1 s
#   interval with full scans every 60 s (bench/watch_cost.sh's policy), its CPU over
#   WATCH_SECONDS, goal < 0.1 % of a core.
# - nothing missed: CHURN_SECONDS of holders opening, forking and exiting (about 100 of each
#   a second) against an exporter that reconciles every 5 s, scraped every second: the
#   reconciliations' missed-holder counter must stay 0 and the last scrape must equal a walk.
#   Then an overflow: an exporter with a fanotify queue of 128 events is stopped (SIGSTOP)
#   while 400 processes open a device node and exit and 20 more open it and stay (their
#   events dropped), and continued: the lost counter rises and its next scrape has the 20.
# Setup: 8 simulated GPUs (r550), 64 GPU processes (8 per GPU), 2,000 other processes. Root.
# Usage: bench/holder_events.sh [CHURN_SECONDS (default 120)] [WATCH_SECONDS (default 60)] [RUNS (default 20)]
#        GPUREAP_BUILD=<build dir> picks the build (default ./build, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
churn_seconds=${1:-120}
watch_seconds=${2:-60}
runs=${3:-20}
build=${GPUREAP_BUILD:-$root/build}
for n in "$churn_seconds" "$watch_seconds" "$runs"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench: CHURN_SECONDS, WATCH_SECONDS and RUNS are positive numbers (got '$n')" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "bench: needs root (fanotify and the process-events connector)" >&2; exit 2; }
[ -x "$build/src/gpureap" ] && [ -f "$build/src/gpureap-http.so" ] && [ -x "$build/sim/gpusim-cuda" ] ||
  "$root/scripts/build.sh" release >/dev/null
for tool in curl python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not installed (scripts/setup-deps.sh)" >&2; exit 2; }
done

source "$root/bench/sim_host.sh"
sim_host_need_pids 2000
sim_host_begin
sim_host_gpu_processes 8 --alloc 1GiB --name /usr/bin/python3
sim_host_grow_others 2000

# An exporter; sets $url to where it serves, $exporter_pid to its PID.
start_exporter() {  # start_exporter NAME ARGS...
  local name=$1
  shift
  "$build/src/gpureap" export --listen 127.0.0.1:0 --no-kernel-log "$@" </dev/null >/dev/null 2>"$state/$name.err" &
  exporter_pid=$!
  sim_host_kill_at_exit "$exporter_pid"
  sim_host_serving_url "$state/$name.err"
  curl -s -o /dev/null "$url"  # the first collection: the first walk, then the events
}
start_exporter events --reconcile 1h
events_url=$url
GPUREAP_HOLDER_EVENTS=off start_exporter walk
walk_url=$url
start_exporter events_fresh --cache 0 --reconcile 1h
events_fresh_url=$url
GPUREAP_HOLDER_EVENTS=off start_exporter walk_fresh --cache 0
walk_fresh_url=$url
# The same without the simulated driver: gpureap's own part of a collection, apart from the
# simulator's (which locks and reads a file per allocation on every call).
GPUREAP_NVML_LIBRARY=/nonexistent start_exporter events_nodriver --cache 0 --reconcile 1h
events_nodriver_url=$url
GPUREAP_NVML_LIBRARY=/nonexistent GPUREAP_HOLDER_EVENTS=off start_exporter walk_nodriver --cache 0
walk_nodriver_url=$url

printf 'host: %s cores, load average %s; 8 simulated GPUs (r550), 64 GPU processes, %s processes in all\n' \
  "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(sim_host_process_count)"

# Open -> visible and fork -> visible, against each exporter.
latency() {  # latency URL RUNS -> "open_ms fork_ms" medians
  python3 "$root/bench/holder_events_probe.py" latency "$1" "$GPUREAP_DEV_DIR/nvidia0" "$2"
}
events_latency=$(latency "$events_url" "$runs")
walk_latency=$(latency "$walk_url" "$(( runs < 10 ? runs : 10 ))")

# A fresh scrape's time as Prometheus waits for it (curl's time_total, one kept-alive connection).
scrape_median_ms() {  # scrape_median_ms URL N
  local urls=()
  for _ in $(seq 1 "$2"); do urls+=(-o /dev/null "$1"); done
  curl -s "${urls[@]:0:6}" >/dev/null
  curl -s -w '%{time_total}\n' "${urls[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "%.2f", 1000 * a[int((NR + 1) / 2)] }'
}
events_scrape=$(scrape_median_ms "$events_fresh_url" 40)
walk_scrape=$(scrape_median_ms "$walk_fresh_url" 40)
events_nodriver=$(scrape_median_ms "$events_nodriver_url" 40)
walk_nodriver=$(scrape_median_ms "$walk_nodriver_url" 40)

# Two watch daemons at once, the same policy, one with events and one walking.
sim_host_watch_policy "$state/policy.toml"
"$build/src/gpureap" watch --policy "$state/policy.toml" 2>"$state/watch-events.log" &
watch_events=$!
sim_host_kill_at_exit "$watch_events"
GPUREAP_HOLDER_EVENTS=off "$build/src/gpureap" watch --policy "$state/policy.toml" 2>"$state/watch-walk.log" &
watch_walk=$!
sim_host_kill_at_exit "$watch_walk"
for log in watch-events watch-walk; do
  for _ in $(seq 1 400); do grep -q 'event=start' "$state/$log.log" 2>/dev/null && break; sleep 0.05; done
  grep -q 'event=start' "$state/$log.log" || { cat "$state/$log.log" >&2; exit 1; }
done
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
start_events=$(cpu_ticks "$watch_events")
start_walk=$(cpu_ticks "$watch_walk")
start_time=$(date +%s.%N)
sleep "$watch_seconds"
end_events=$(cpu_ticks "$watch_events")
end_walk=$(cpu_ticks "$watch_walk")
end_time=$(date +%s.%N)
kill -TERM "$watch_events" "$watch_walk"
wait "$watch_events" "$watch_walk" || true
driver_cpu() { sed -n 's/.*event=stop .*driver_cpu_seconds=\([0-9.]*\).*/\1/p' "$state/$1.log"; }
full_scans() { grep -c 'event=scan' "$state/$1.log" || true; }

# Churn against an exporter that reconciles every 5 s.
start_exporter churn --cache 0 --reconcile 5s
GPUREAP="$build/src/gpureap" python3 "$root/bench/holder_events_probe.py" churn "$url" "$GPUREAP_DEV_DIR" "$churn_seconds" \
  >"$state/churn.out"
# Each holder a reconciliation found that the events had missed, as the exporter explained it
# (what the events said of it and of its parent, and when they were read): the first 20.
{ grep -h 'a holder the events had missed' "$state/churn.err" || true; } | head -n 20 | sed 's/^/  /' >>"$state/churn.out"
# An overflow forced: an exporter whose fanotify queue holds 128 events (the length is taken
# when its group is made, at its first collection), stopped while 400 processes open a node.
queue=/proc/sys/fs/fanotify/max_queued_events
queue_length=$(cat "$queue")
restore_queue() { echo "$queue_length" >"$queue"; }
sim_host_at_exit restore_queue
echo 128 >"$queue"
start_exporter overflow --cache 0 --reconcile 1h
restore_queue
python3 "$root/bench/holder_events_probe.py" overflow "$url" "$GPUREAP_DEV_DIR" "$exporter_pid" 400 >>"$state/churn.out"

python3 - "$events_latency" "$walk_latency" "$events_scrape $events_nodriver" "$walk_scrape $walk_nodriver" "$(getconf CLK_TCK)" \
  "$start_events" "$end_events" "$start_walk" "$end_walk" "$start_time" "$end_time" \
  "$(driver_cpu watch-events)" "$(driver_cpu watch-walk)" "$(full_scans watch-events)" "$(full_scans watch-walk)" \
  "$runs" <<'PY'
import sys
a = sys.argv[1:]
ev_open, ev_fork = (float(x) for x in a[0].split())
wk_open, wk_fork = (float(x) for x in a[1].split())
ev_scrape, ev_nodriver = (float(x) for x in a[2].split())
wk_scrape, wk_nodriver = (float(x) for x in a[3].split())
ticks = float(a[4])
seconds = float(a[10]) - float(a[9])
ev_cpu = (float(a[6]) - float(a[5])) / ticks
wk_cpu = (float(a[8]) - float(a[7])) / ticks
ev_driver, wk_driver = float(a[11] or 0), float(a[12] or 0)
ev_scans, wk_scans, runs = int(a[13]), int(a[14]), int(a[15])
pct = lambda cpu: 100 * cpu / seconds
verdict = lambda ok: "met" if ok else "MISSED"
print(f"\n{'':44} {'events':>9} {'walk':>9} {'events/walk':>11}   goal")
rows = [
    ("open -> visible in export (ms, median)", ev_open, wk_open, ev_open < 50, "< 50 ms"),
    ("fork -> visible in export (ms, median)", ev_fork, wk_fork, ev_fork < 50, "< 50 ms"),
    ("export fresh scrape (ms, median of 40)", ev_scrape, wk_scrape, ev_scrape < 5, "< 5 ms"),
    ("  the same without the simulated driver", ev_nodriver, wk_nodriver, None, ""),
    (f"watch CPU, % of a core over {seconds:.0f} s", pct(ev_cpu), pct(wk_cpu), pct(ev_cpu) < 0.1, "< 0.1 %"),
    ("  of which the simulated driver", pct(ev_driver), pct(wk_driver), None, ""),
    ("  of which gpureap itself", pct(max(ev_cpu - ev_driver, 0)), pct(max(wk_cpu - wk_driver, 0)), None, ""),
]
for name, ev, wk, ok, goal in rows:
    ratio = f"{ev / wk:.3f}" if wk > 0 else "-"
    print(f"{name:<44} {ev:>9.2f} {wk:>9.2f} {ratio:>11}   {'' if ok is None else goal + ' ' + verdict(ok)}")
print(f"\nlatency: {runs} runs with events, {min(runs, 10)} walking; export at its default --cache 1s, scraped back to back")
print(f"watch: full scans in the window {ev_scans} (events) and {wk_scans} (walk), each counted with the one at start")
PY
echo
cat "$state/churn.out"
