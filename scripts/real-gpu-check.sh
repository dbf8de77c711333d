#!/usr/bin/env bash
# Checks gpureap against a real NVIDIA GPU (needs the driver, nvidia-smi and PyTorch).
# Starts a process that takes about 2 GiB on GPU 0, forks a worker that inherits its
# descriptors (like a DataLoader worker), then compares `gpureap ps --json` with
# `nvidia-smi --query-compute-apps`, then ends the holder with `gpureap kill` and checks that
# the worker went too and the memory came back. Read-only towards the GPU: it never resets or
# reconfigures anything; the only processes it signals are the two it started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gpureap=${GPUREAP:-$root/build/src/gpureap}
[ -x "$gpureap" ] || "$root/scripts/build.sh" release >/dev/null
command -v nvidia-smi >/dev/null || { echo "real-gpu-check: nvidia-smi not found" >&2; exit 2; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
  { echo "real-gpu-check: PyTorch with CUDA not available" >&2; exit 2; }

work=$(mktemp -d)
cleanup() {
  [ -n "$holder_pid" ] && kill -TERM -- "-$holder_pid" 2>/dev/null || true
  sleep 1
  [ -n "$holder_pid" ] && kill -KILL -- "-$holder_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/hold.py" <<'PY'
import os, sys, time, torch
x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda:0")
x.fill_(1)
torch.cuda.synchronize()
worker = os.fork()
if worker == 0:  # inherits the CUDA descriptors; never touches CUDA itself
    time.sleep(600)
    os._exit(0)
print(f"READY {os.getpid()} {worker}", flush=True)
time.sleep(600)
PY
setsid python3 "$work/hold.py" >"$work/ready" 2>"$work/err" &
holder_pid=$!
for _ in $(seq 1 120); do grep -q READY "$work/ready" 2>/dev/null && break; sleep 0.5; done
grep -q READY "$work/ready" || { echo "holder did not start:"; cat "$work/err"; exit 1; }
read -r _ pid worker <"$work/ready"
sleep 2  # let the driver's accounting settle

nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$work/smi.csv"
"$gpureap" ps --json >"$work/ps.json" || true
"$gpureap" ps --tree --color never || true

ps_ok=0
if python3 - "$work/smi.csv" "$work/ps.json" "$pid" "$worker" <<'PY'
import json, sys
smi_path, ps_path, pid, worker = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
smi = {}
for line in open(smi_path):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 2 and parts[0].isdigit():
        smi[int(parts[0])] = int(parts[1]) * 1024 * 1024
ps = json.load(open(ps_path))
rows = [p for p in ps["processes"] if p["pid"] == pid]
holder = next((h for h in ps["holders"] if h["pid"] == worker), None)
ok = True
print(f"{'check':<44} {'result'}")
def check(name, cond, detail=""):
    global ok
    ok &= bool(cond)
    print(f"{name:<44} {'PASS' if cond else 'FAIL'} {detail}")
check("nvidia-smi lists the holder", pid in smi, f"({smi.get(pid, 0) / 2**30:.2f} GiB)")
check("gpureap lists the holder", bool(rows))
if rows and pid in smi:
    mine = rows[0]["gpu_memory_bytes"] or 0
    diff = abs(mine - smi[pid]) / max(smi[pid], 1)
    check("memory within 5% of nvidia-smi", diff <= 0.05, f"(gpureap {mine / 2**30:.2f} GiB, diff {diff:.1%})")
    check("identity ok", rows[0]["identity"] == "ok", f"({rows[0]['identity']})")
check("worker found as holder of the GPU", holder is not None and holder["gpus"],
      f"(role {holder['role'] if holder else '-'})")
check("worker not listed by the driver", holder is not None and not holder["listed_by_driver"])
g = ps["gpus"][0]
print(f"\nGPU 0 {g['name']}: used {g['memory']['used_bytes'] / 2**30:.2f} GiB, "
      f"attributed {g['memory']['attributed_bytes'] / 2**30:.2f} GiB, "
      f"unattributed {(g['memory']['unattributed_bytes'] or 0) / 2**30:.2f} GiB, "
      f"driver {ps['driver']['driver_version']}")
sys.exit(0 if ok else 1)
PY
then ps_ok=1; fi

echo; echo "== gpureap kill $pid (its tree: the worker too) =="
kill_rc=0
"$gpureap" kill --yes --json --timeout 5 "$pid" >"$work/kill.json" || kill_rc=$?
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$work/smi-after.csv"
if python3 - "$work/kill.json" "$kill_rc" "$work/smi-after.csv" "$pid" "$worker" <<'PY'
import json, os, sys
report, rc, smi_path, pid, worker = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
ok = True
def check(name, cond, detail=""):
    global ok
    ok &= bool(cond)
    print(f"{name:<44} {'PASS' if cond else 'FAIL'} {detail}")
outcomes = {t["pid"]: t["outcome"] for t in report["targets"]}
check("kill exit status 0", rc == 0, f"(exit {rc})")
check("holder ended", outcomes.get(pid) in ("exited", "killed"), f"({outcomes.get(pid)})")
check("worker ended with it", outcomes.get(worker) in ("exited", "killed"), f"({outcomes.get(worker)})")
def state(p):
    try:
        return open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
# Once its parent is gone the worker is reparented; an init that does not reap leaves a zombie,
# which holds nothing.
check("worker gone (or a zombie)", state(worker) in (None, "Z"), f"(state {state(worker)})")
gpu = report["gpus"][0] if report["gpus"] else {}
check("memory release verified", gpu.get("verified") is True,
      f"(freed {(gpu.get('freed_bytes') or 0) / 2**30:.2f} GiB in {gpu.get('verify_ms')} ms)")
still = [l.split(",")[0].strip() for l in open(smi_path) if l.split(",")[0].strip() == str(pid)]
check("nvidia-smi no longer lists the holder", not still)
sys.exit(0 if ok else 1)
PY
then kill_ok=1; else kill_ok=0; fi
[ "$ps_ok" = 1 ] && [ "$kill_ok" = 1 ]
