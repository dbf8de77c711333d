#!/usr/bin/env bash
# Benchmark: `gpureap ps --json` (driver query + full /proc join) against `fuser -v` and
# `lsof` on the same GPU device files, on a host with 2,000 extra sleeping processes plus
# simulated GPU workloads. Prints medians and ratios measured in one run.
# Usage: bench/ps_vs_fuser.sh [EXTRA_PROCESSES (default 2000)] [RUNS (default 30)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
extra=${1:-2000}
runs=${2:-30}
build="$root/build"
[ -x "$build/src/gpureap" ] && [ -x "$build/sim/gpusim-cuda" ] || "$root/scripts/build.sh" release >/dev/null
command -v hyperfine >/dev/null || { echo "bench: hyperfine not installed (scripts/setup-deps.sh installs it)" >&2; exit 2; }

state=$(mktemp -d /tmp/gpureap-bench-XXXXXX)
pgids=()
cleanup() {
  for g in "${pgids[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  [ -n "${sleepers_pgid:-}" ] && kill -KILL -- "-$sleepers_pgid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$state"
}
trap cleanup EXIT

export GPUSIM_STATE_DIR="$state" GPUREAP_DEV_DIR="$state/dev"
export GPUREAP_NVML_LIBRARY="$build/sim/drivers/r550/libnvidia-ml.so.1" NO_COLOR=1
"$build/sim/gpusim" init --gpus 8 --memory 80GiB >/dev/null

# GPU workloads: 8 training jobs with 4 DataLoader workers each, one per GPU.
for gpu in 0 1 2 3 4 5 6 7; do
  setsid "$build/sim/gpusim-cuda" --alloc "$gpu:20GiB" --workers 4 >"$state/ready.$gpu" &
  pgids+=($!)
done
for gpu in 0 1 2 3 4 5 6 7; do
  for _ in $(seq 1 100); do grep -q READY "$state/ready.$gpu" 2>/dev/null && break; sleep 0.05; done
done

# Extra processes that hold no GPU file: every tool must still look at each of them.
setsid bash -c "for i in \$(seq 1 $extra); do sleep 3600 & done; wait" &
sleepers_pgid=$!
for _ in $(seq 1 200); do
  [ "$(pgrep -c -g "$sleepers_pgid" || true)" -gt "$extra" ] && break
  sleep 0.1
done
procs=$(ls -d /proc/[0-9]* | wc -l)
files=("$state"/dev/nvidiactl "$state"/dev/nvidia-uvm "$state"/dev/nvidia[0-9]*)

echo "host: $(nproc) cores, $procs processes in /proc, 8 simulated GPUs, 40 GPU processes"
"$build/src/gpureap" ps --json >"$state/ps.json"
holders=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["holders"]))' "$state/ps.json")
echo "holders of the device files: gpureap $holders processes; fuser $(fuser "${files[@]}" 2>/dev/null | tr ' ' '\n' | grep -c .) (process, file) pairs"

hyperfine -i --style basic --warmup 3 --runs "$runs" --export-json "$state/hf.json" \
  -n "gpureap ps --json" "$build/src/gpureap ps --json" \
  -n "fuser -v" "fuser -v ${files[*]}" \
  -n "lsof" "lsof -w ${files[*]}" >"$state/hyperfine.log" 2>&1

python3 - "$state/hf.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
g = results["gpureap ps --json"]["median"]
print(f"{'command':<22} {'median ms':>10} {'mean ms':>9} {'stddev':>8} {'vs gpureap':>11}")
for name, r in results.items():
    print(f"{name:<22} {r['median']*1e3:>10.2f} {r['mean']*1e3:>9.2f} {r['stddev']*1e3:>8.2f} {r['median']/g:>10.2f}x")
f = results["fuser -v"]["median"]
print(f"\ngpureap / fuser ratio: {g/f:.2f} (goal: <= 0.50)")
PY
