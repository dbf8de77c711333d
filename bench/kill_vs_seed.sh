#!/usr/bin/env bash
# Benchmark: time from invocation to verified-free GPU memory for a process that exits on
# SIGTERM (simulator release delay 0), `gpureap kill PID --yes` against the seed practice
# `kill PID; sleep 5; kill -0 PID` followed by a look at the driver. Also reports gpureap's
# exit detection (first signal -> pidfd readable) and its verification time. Medians, one run.
# Usage: bench/kill_vs_seed.sh [GPUREAP_RUNS (default 30)] [SEED_RUNS (default 3)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-30}
seed_runs=${2:-3}
build=${GPUREAP_BUILD:-$root/build}
[ -x "$build/src/gpureap" ] && [ -x "$build/sim/gpusim-cuda" ] || "$root/scripts/build.sh" release >/dev/null

state=$(mktemp -d /tmp/gpureap-bench-XXXXXX)
trap 'rm -rf "$state"' EXIT
export GPUSIM_STATE_DIR="$state" GPUREAP_DEV_DIR="$state/dev"
export GPUREAP_NVML_LIBRARY="$build/sim/drivers/r550/libnvidia-ml.so.1" NO_COLOR=1
"$build/sim/gpusim" init --gpus 1 --memory 80GiB >/dev/null
"$build/sim/gpusim" set --gpu 0 release_delay_ms=0 >/dev/null

python3 - "$build" "$runs" "$seed_runs" <<'PY'
import json, os, signal, statistics, subprocess, sys, threading, time
build, runs, seed_runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gpureap = f"{build}/src/gpureap"
cuda = f"{build}/sim/gpusim-cuda"
gpusim = f"{build}/sim/gpusim"

def start():
    """A simulated CUDA job holding 4 GiB; a thread reaps it the moment it exits, as a shell would."""
    p = subprocess.Popen([cuda, "--alloc", "0:4GiB", "--release-delay", "0"], stdout=subprocess.PIPE,
                         start_new_session=True, text=True)
    line = p.stdout.readline()
    assert line.startswith("READY"), line
    threading.Thread(target=p.wait, daemon=True).start()
    return p, int(line.split()[1].split("=")[1])

def used_bytes():
    status = json.loads(subprocess.run([gpusim, "status", "--json"], capture_output=True, text=True).stdout)
    return status["gpus"][0]["memory"]["used"]

total, exit_ms, verify_ms = [], [], []
for _ in range(runs):
    p, pid = start()
    t0 = time.perf_counter()
    r = subprocess.run([gpureap, "kill", str(pid), "--yes", "--json"], capture_output=True, text=True)
    total.append((time.perf_counter() - t0) * 1e3)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    report = json.loads(r.stdout)
    assert report["gpus"][0]["verified"], report
    exit_ms.append(report["targets"][0]["exit_ms"])
    verify_ms.append(report["gpus"][0]["verify_ms"])

seed = []
for _ in range(seed_runs):
    p, pid = start()
    t0 = time.perf_counter()
    # The seed practice: kill PID; sleep 5; kill -0 PID (gone?), then look at the driver.
    r = subprocess.run(["/bin/sh", "-c", f"kill {pid}; sleep 5; ! kill -0 {pid} 2>/dev/null"])
    freed = used_bytes() == 0
    seed.append((time.perf_counter() - t0) * 1e3)
    assert r.returncode == 0 and freed

med = statistics.median
print(f"host: {os.cpu_count()} cores; 1 simulated GPU (r550), one 4 GiB job per run, release delay 0")
print(f"{'method':<40} {'runs':>5} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
print(f"{'gpureap kill PID --yes (to verified)':<40} {runs:>5} {med(total):>10.1f} {min(total):>8.1f} {max(total):>8.1f}")
print(f"{'kill; sleep 5; kill -0 (+ driver look)':<40} {seed_runs:>5} {med(seed):>10.1f} {min(seed):>8.1f} {max(seed):>8.1f}")
print(f"\ngpureap, inside the run: first signal -> exit seen (pidfd) median {med(exit_ms):.2f} ms "
      f"(max {max(exit_ms):.2f}); exit -> memory verified free median {med(verify_ms):.2f} ms")
print(f"speed-up: {med(seed)/med(total):.0f}x; goal: gpureap median < 100 ms -> "
      f"{'met' if med(total) < 100 else 'NOT met'}")
PY
