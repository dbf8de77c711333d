#!/usr/bin/env bash
# Checks `gpureap run` and `gpureap reap` against a real NVIDIA GPU (needs the driver,
# nvidia-smi and PyTorch). A 2-rank PyTorch job, each rank holding ~2 GiB on GPU 0 and forking
# two DataLoader-style workers that inherit its CUDA descriptors, runs under
# `gpureap run --fail-fast`; one rank is SIGKILLed; the rest of the job must be ended and the
# driver must show the memory free. Then a job whose workers outlive it is reaped with
# `gpureap reap --cgroup` (a cgroup the script makes for it). It never resets or reconfigures the GPU; the only processes it signals
# are the ones it started. Prints what it saw; exits non-zero when a check failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gpureap=${GPUREAP:-$root/build/src/gpureap}
[ -x "$gpureap" ] || "$root/scripts/build.sh" release >/dev/null
command -v nvidia-smi >/dev/null || { echo "real-gpu-run-check: nvidia-smi not found" >&2; exit 2; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
  { echo "real-gpu-run-check: PyTorch with CUDA not available" >&2; exit 2; }

work=$(mktemp -d)
cleanup() {
  pkill -KILL -f "$work/rank.py" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
check() {  # check WHAT CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}
listed() { nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr -d ' ' | grep -c . || true; }
used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '; }

echo "before: GPU 0 used $(used_mib) MiB, $(listed) compute processes listed"
cat >"$work/rank.py" <<'PY'
import os, sys, time, torch
x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda:0")
x.fill_(1)
torch.cuda.synchronize()
for _ in range(2):  # DataLoader-style workers: forked, inheriting the CUDA descriptors
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
print(f"RANK {os.getpid()}", flush=True)
time.sleep(600 if sys.argv[1] == "wait" else 5)
PY

# 1. --fail-fast: one rank SIGKILLed ends the job; the memory comes back.
"$gpureap" run --fail-fast --kill-timeout 5 --verify-timeout 30 --report "$work/run.json" -- \
  /bin/sh -c "python3 $work/rank.py wait & python3 $work/rank.py wait & wait" >"$work/ranks" 2>"$work/run.err" &
runner=$!
for _ in $(seq 1 240); do [ "$(grep -c RANK "$work/ranks" 2>/dev/null)" = 2 ] && break; sleep 0.5; done
[ "$(grep -c RANK "$work/ranks")" = 2 ] || { echo "ranks did not start:"; cat "$work/run.err"; exit 1; }
echo "running: GPU 0 used $(used_mib) MiB, $(listed) compute processes listed"
sleep 2  # gpureap looks at the job every 500 ms: let it see both ranks on the GPU
victim=$(awk '/RANK/ {print $2; exit}' "$work/ranks")
t0=$(date +%s.%N)
kill -KILL "$victim"
rc=0
wait "$runner" || rc=$?
t1=$(date +%s.%N)
echo "gpureap run exit $rc after $(echo "$t1 - $t0" | bc) s"
cat "$work/run.err"
python3 - "$work/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("end:", r["end"], "failed:", r["failed_process"], "exit_events:", r["exit_events"])
for e in r["left_and_ended"]:
    print("  ended", e["pid"], e["outcome"], e["signals"], e["exit_ms"])
for g in r["gpus"]:
    print("  gpu", g["index"], "peak", g["job_peak_bytes"], "verified", g["verified_free"], "in", g["verify_ms"], "ms",
          "freed", g["freed_bytes"], g["message"])
PY
check "exit status is the killed rank's (137)" test "$rc" = 137
check "nothing of the job is listed by the driver" test "$(listed)" = 0
echo "after: GPU 0 used $(used_mib) MiB"

# 2. reap --cgroup: a job whose forked workers outlive it is cleaned up by its cgroup (a cgroup
# this script makes, so that nothing else of the machine can be selected).
v2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
if [ -z "$v2" ] || ! mkdir "$v2/gpureap-real-gpu-check.$$" 2>/dev/null; then
  echo "skipped: reap --cgroup (no writable cgroup v2 hierarchy here)"
  exit $((failures > 0))
fi
job_cgroup="$v2/gpureap-real-gpu-check.$$"
(echo 0 >"$job_cgroup/cgroup.procs" && exec setsid python3 "$work/rank.py" exit) >"$work/ranks2" 2>&1 &
for _ in $(seq 1 240); do grep -q RANK "$work/ranks2" 2>/dev/null && break; sleep 0.5; done
sleep 6  # the rank exits after 5 s; its workers keep its context (and memory)
echo "orphaned workers: GPU 0 used $(used_mib) MiB, $(listed) compute processes listed"
rc=0
"$gpureap" reap --cgroup "$job_cgroup" --gpus 0 --kill-timeout 5 --verify-timeout 30 --json >"$work/reap.json" || rc=$?
echo "gpureap reap exit $rc"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print([(t["pid"], t["outcome"]) for t in r["targets"]]); print(r["gpus"])' "$work/reap.json"
rmdir "$job_cgroup" 2>/dev/null || true
check "reap exit 0" test "$rc" = 0
check "nothing listed after reap" test "$(listed)" = 0
echo "after reap: GPU 0 used $(used_mib) MiB"
exit $((failures > 0))
