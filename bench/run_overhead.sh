#!/usr/bin/env bash
# Benchmark: what `gpureap run` costs a job that exits at once (the issue's goal: under 5 ms).
# `COMMAND` alone is the reference, measured in the same run; `gpureap run -- COMMAND` with its
# own cgroup (as root) and with --no-cgroup. Prints mean and median wall times, the overhead in
# ms and the ratio to the reference. hyperfine, no shell in between (-N).
# Usage: bench/run_overhead.sh [RUNS (default 200)] [COMMAND (default /bin/true)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-200}
command=${2:-/bin/true}
build=${GPUREAP_BUILD:-$root/build}
[ -x "$build/src/gpureap" ] || "$root/scripts/build.sh" release >/dev/null
gpureap=$build/src/gpureap
out=$(mktemp /tmp/gpureap-run-bench-XXXXXX.json)
trap 'rm -f "$out"' EXIT

echo "load: $(cut -d' ' -f1-3 /proc/loadavg), cores: $(nproc), $(uname -r), uid $(id -u)"
hyperfine -N --warmup 20 --runs "$runs" --export-json "$out" --style none \
  "$command" "$gpureap run -- $command" "$gpureap run --no-cgroup -- $command" >/dev/null
python3 - "$out" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
ref = results[0]
print(f"{'command':<48} {'mean ms':>8} {'median ms':>9} {'overhead ms':>11} {'ratio':>6}")
for r in results:
    name = r["command"].replace(sys.argv[1], "")
    mean, median = r["mean"] * 1e3, r["median"] * 1e3
    print(f"{name[-48:]:<48} {mean:8.2f} {median:9.2f} {mean - ref['mean'] * 1e3:11.2f} {r['mean'] / ref['mean']:6.2f}")
PY
