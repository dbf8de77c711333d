#!/usr/bin/env bash
# Benchmark: a Prometheus scrape of `gpureap export`, served from the shared collection and
# from a fresh one, side by side in one run with the per-scrape costs of the alternatives an
# exporter could use: running `gpureap ps --json` per scrape, and running
# `nvidia-smi --query-gpu=...` per scrape (the simulated nvidia-smi, on the same GPUs).
# Setup: 8 simulated GPUs, 64 GPU processes (8 per GPU), 2,000 other processes.
# Usage: bench/export_scrape.sh [RUNS (default 40)]
#        GPUREAP_BUILD=<build dir> picks the build (default ./build, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-40}
build=${GPUREAP_BUILD:-$root/build}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "bench: RUNS must be a positive number (got '$runs')" >&2; exit 2; }
[ -x "$build/src/gpureap" ] && [ -f "$build/src/gpureap-http.so" ] && [ -x "$build/sim/gpusim-cuda" ] &&
  [ -x "$build/sim/bin/nvidia-smi" ] || "$root/scripts/build.sh" release >/dev/null
for tool in hyperfine curl python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not installed (scripts/setup-deps.sh)" >&2; exit 2; }
done
source "$root/bench/sim_host.sh"
sim_host_need_pids 2000
sim_host_begin
# 64 GPU processes, 8 per GPU, in one process group per GPU.
sim_host_gpu_processes 8 --alloc 2GiB
# 2,000 other processes that hold no GPU file: every collection still looks at each.
sim_host_grow_others 2000

# An exporter; sets $url to where it serves. --per-process: 64 series more, the largest
# exposition.
start_exporter() {  # start_exporter NAME ARGS...
  local name=$1
  shift
  "$build/src/gpureap" export --listen 127.0.0.1:0 --per-process "$@" </dev/null >/dev/null 2>"$state/$name.err" &
  sim_host_kill_at_exit $!
  sim_host_serving_url "$state/$name.err"
}
start_exporter shared --cache 60s
shared=$url
start_exporter fresh --cache 0
fresh=$url
# The same without the simulated driver: gpureap's own part of a fresh collection (the /proc
# scan, doctor's quick checks, the text), apart from the simulator's (which locks and reads a
# file per allocation on every call, where a real driver answers an ioctl).
GPUREAP_NVML_LIBRARY=/nonexistent start_exporter nodriver --cache 0
nodriver=$url

# Scrape latency as Prometheus sees it: one connection, one request after the other, each
# request's total time (curl reuses the connection for the URLs of one command line).
scrape_times() {  # scrape_times URL N -> one time in seconds per line
  local urls=()
  for _ in $(seq 1 "$2"); do urls+=(-o /dev/null "$1"); done
  curl -s -w '%{time_total}\n' "${urls[@]}"
}
scrape_times "$shared" 5 >/dev/null  # warm-up: the first collection, connections
scrape_times "$fresh" 3 >/dev/null
scrape_times "$shared" "$((runs * 5))" >"$state/shared.times"
scrape_times "$fresh" "$runs" >"$state/fresh.times"
scrape_times "$nodriver" 3 >/dev/null
scrape_times "$nodriver" "$runs" >"$state/nodriver.times"
smi=("$build/sim/bin/nvidia-smi" --query-gpu=index,uuid,name,memory.total,memory.used,memory.free --format=csv,noheader,nounits)
hyperfine -N -i --style none --warmup 3 --runs "$runs" --export-json "$state/hf.json" \
  -n "gpureap ps --json" "$build/src/gpureap ps --json" \
  -n "nvidia-smi --query-gpu" "${smi[*]}" \
  -n "gpureap --version" "$build/src/gpureap --version" \
  -n "ps --json, no driver" "env GPUREAP_NVML_LIBRARY=/nonexistent $build/src/gpureap ps --json" \
  >"$state/hyperfine.log" 2>&1 ||
  { cat "$state/hyperfine.log" >&2; exit 1; }
size=$(curl -s "$shared" | wc -c)
collections=$(curl -s "$shared" | sed -n 's/^gpureap_collections_total \([0-9]*\)$/\1/p')
printf 'host: %s cores, load average %s; 8 simulated GPUs (r550), %s GPU processes, %s processes in all; %s runs\n' \
  "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(grep -hc READY "$state"/ready.* | paste -sd+ | bc)" \
  "$(sim_host_process_count)" "$runs"
echo "exposition: $size bytes with --per-process; the shared exporter ran $collections collection(s) for $((runs * 5 + 6)) scrapes"

python3 - "$state" <<'PY'
import json, statistics, sys
state = sys.argv[1]
ms = lambda path: statistics.median(float(l) for l in open(path) if l.strip()) * 1e3
shared, fresh, nodriver = (ms(f"{state}/{n}.times") for n in ("shared", "fresh", "nodriver"))
hf = {r["command"]: r["median"] * 1e3 for r in json.load(open(f"{state}/hf.json"))["results"]}
ps, smi, version = hf["gpureap ps --json"], hf["nvidia-smi --query-gpu"], hf["gpureap --version"]
ps_nodriver = hf["ps --json, no driver"]
print(f"\n{'per scrape':<44} {'median ms':>9} {'/ ps --json':>11} {'/ nvidia-smi':>12}   goal")
rows = [("gpureap export, shared collection (--cache)", shared, "< 5 ms", shared < 5),
        ("gpureap export, fresh collection (--cache 0)", fresh, "< 50 ms", fresh < 50),
        ("gpureap ps --json, run per scrape", ps, "", None),
        ("nvidia-smi --query-gpu (simulated), per scrape", smi, "", None)]
for name, value, goal, met in rows:
    verdict = "" if met is None else f"{goal} {'met' if met else 'MISSED'}"
    print(f"{name:<44} {value:>9.2f} {value / ps:>11.2f} {value / smi:>12.2f}   {verdict}")
print(f"\nwithout the simulated driver: a fresh collection {nodriver:.2f} ms, ps --json {ps_nodriver:.2f} ms "
      f"(the rest of each is the simulator's)")
print(f"gpureap --version (start-up alone): {version:.2f} ms")
print("scrapes: curl's time_total per request on one kept-alive connection (what Prometheus waits);")
print("ps --json and nvidia-smi: hyperfine medians (-N, 3 warm-ups), a process started per scrape.")
PY
