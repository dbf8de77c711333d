#!/usr/bin/env bash
# Checks `gpureap doctor` against a real NVIDIA GPU (needs the driver, nvidia-smi and PyTorch).
# Starts a process that takes about 3 GiB on GPU 0 and forks a worker that inherits its
# descriptors, SIGKILLs the process, then checks that doctor explains the memory by the orphaned
# worker and that `doctor --fix --yes` ends it and gets the memory back. It never resets or
# reconfigures the GPU (no --allow-reset); the only processes it signals are the ones it started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gpureap=${GPUREAP:-$root/build/src/gpureap}
[ -x "$gpureap" ] || "$root/scripts/build.sh" release >/dev/null
command -v nvidia-smi >/dev/null || { echo "real-gpu-doctor-check: nvidia-smi not found" >&2; exit 2; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
  { echo "real-gpu-doctor-check: PyTorch with CUDA not available" >&2; exit 2; }

work=$(mktemp -d)
group=""
cleanup() {
  [ -n "$group" ] && kill -KILL -- "-$group" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

rc=0
"$gpureap" doctor --json >"$work/idle.json" || rc=$?
echo "doctor on the idle GPU: exit $rc"

cat >"$work/hold.py" <<'PY'
import os, time, torch
x = torch.empty(3 * 1024**3, dtype=torch.uint8, device="cuda:0")
x.fill_(1)
torch.cuda.synchronize()
if os.fork() == 0:  # a DataLoader-style worker: inherits the CUDA descriptors
    time.sleep(600)
    os._exit(0)
print(f"READY {os.getpid()}", flush=True)
time.sleep(600)
PY
setsid python3 "$work/hold.py" >"$work/ready" 2>"$work/err" &
group=$!
for _ in $(seq 1 120); do grep -q READY "$work/ready" 2>/dev/null && break; sleep 0.5; done
grep -q READY "$work/ready" || { echo "holder did not start:"; cat "$work/err"; exit 1; }
read -r _ owner <"$work/ready"
kill -KILL "$owner"
sleep 2
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$work/smi.csv"
orphan_rc=0
"$gpureap" doctor --json >"$work/orphan.json" || orphan_rc=$?
"$gpureap" doctor || true
fix_rc=0
"$gpureap" doctor --fix --yes --json >"$work/fix.json" || fix_rc=$?
used_after=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0)

python3 - "$work" "$owner" "$orphan_rc" "$fix_rc" "$used_after" <<'PY'
import json, sys
work, owner, orphan_rc, fix_rc, used_after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
smi = [l.split(",") for l in open(f"{work}/smi.csv") if l.strip()]
orphan, fix = json.load(open(f"{work}/orphan.json")), json.load(open(f"{work}/fix.json"))
ok = True
def check(name, cond, detail=""):
    global ok
    ok &= bool(cond)
    print(f"{name:<52} {'PASS' if cond else 'FAIL'} {detail}")
listed = {int(p): int(m) for p, m in smi}
check("nvidia-smi still lists the dead owner", owner in listed, f"({listed.get(owner, 0)} MiB)")
found = [f for f in orphan["findings"] if f["id"] == "orphaned-holders" and f["gpu"] == 0]
check("doctor: orphaned-holders on GPU 0", bool(found), f"(exit {orphan_rc})")
if found:
    ev = found[0]["evidence"]
    exited = [e["pid"] for e in ev["listed_for_exited"]]
    check("doctor: names the exited owner", owner in exited, f"(listed_for_exited {exited})")
    check("doctor: held bytes >= 3 GiB", ev["held_bytes"] >= 3 * 2**30, f"({ev['held_bytes'] / 2**30:.2f} GiB)")
check("doctor exit status 1 (warning)", orphan_rc == 1)
done = [f for f in fix["fixes"] or [] if f["finding_id"] == "orphaned-holders"]
check("doctor --fix ended the orphan", bool(done) and done[0]["outcome"] == "done",
      f"({done[0]['message'] if done else 'no fix'})")
check("doctor --fix exit status 0 afterwards", fix_rc == 0, f"(exit {fix_rc})")
check("GPU 0 memory back (< 64 MiB used)", used_after < 64, f"({used_after} MiB)")
sys.exit(0 if ok else 1)
PY
