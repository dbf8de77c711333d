#!/usr/bin/env bash
# Checks gpureap against NVIDIA MPS on a real GPU (needs the driver, nvidia-smi,
# nvidia-cuda-mps-control and PyTorch; run as root). Starts a control daemon of its own with a
# private pipe and log directory (it changes no setting of the card: no compute mode, no reset;
# a daemon already running elsewhere is left alone), two PyTorch clients on GPU 0 that keep
# computing and checking their results, compares `gpureap ps --json` with nvidia-smi's
# processes, ends one client with `gpureap kill` and checks that the other still computes
# correctly and the server still runs, then quits the daemon. The only processes it signals are
# the ones it started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gpureap=${GPUREAP:-$root/build/src/gpureap}
[ -x "$gpureap" ] || "$root/scripts/build.sh" release >/dev/null
for tool in nvidia-smi nvidia-cuda-mps-control; do
  command -v "$tool" >/dev/null || { echo "real-gpu-mps-check: $tool not found" >&2; exit 2; }
done
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
  { echo "real-gpu-mps-check: PyTorch with CUDA not available" >&2; exit 2; }

work=$(mktemp -d)
export CUDA_MPS_PIPE_DIRECTORY="$work/pipe" CUDA_MPS_LOG_DIRECTORY="$work/log"
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
  echo quit | nvidia-cuda-mps-control 2>/dev/null || true
  sleep 1
  echo "== MPS logs =="; tail -n 20 "$CUDA_MPS_LOG_DIRECTORY"/*.log 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The checks' printer, shared by both checks below.
cat >"$work/checks.py" <<'PY'
ok = True
def check(name, cond, detail=""):
    global ok
    ok = ok and bool(cond)
    print(f"{name:<52} {'PASS' if cond else 'FAIL'} {detail}")
PY

nvidia-cuda-mps-control -d
for _ in $(seq 1 20); do [ -s "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid" ] && break; sleep 0.25; done
daemon=$(cat "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid")
echo "control daemon $daemon, pipe directory $CUDA_MPS_PIPE_DIRECTORY"

# Each client holds ~1 GiB and checks a matrix product against the CPU every second, writing
# "OK <n>" to its log; a wrong result or a CUDA error ends it with "FAIL".
cat >"$work/client.py" <<'PY'
import os, sys, time, torch
log = open(sys.argv[1], "a", buffering=1)
hold = torch.empty(1024**3, dtype=torch.uint8, device="cuda:0")
hold.fill_(1)
a = torch.randn(512, 512)
expected = a @ a
g = a.to("cuda:0")
print(f"READY {os.getpid()}", flush=True)
n = 0
try:
    while True:
        got = (g @ g).cpu()
        n += 1
        log.write(("OK" if torch.allclose(got, expected, atol=1e-2) else "FAIL wrong result") + f" {n}\n")
        time.sleep(1)
except Exception as e:  # noqa: BLE001
    log.write(f"FAIL {e}\n")
    raise
PY
start_client() {
  setsid python3 "$work/client.py" "$work/$1.log" >"$work/$1.ready" 2>"$work/$1.err" &
  pids+=($!)
  for _ in $(seq 1 120); do grep -q READY "$work/$1.ready" 2>/dev/null && break; sleep 0.5; done
  grep -q READY "$work/$1.ready" || { echo "client $1 did not start:"; cat "$work/$1.err"; exit 1; }
}
start_client target
start_client bystander
read -r _ target <"$work/target.ready"
read -r _ bystander <"$work/bystander.ready"
sleep 3
server=$(echo get_server_list | nvidia-cuda-mps-control | head -1)
echo "server $server, clients: target $target, bystander $bystander"
echo "get_client_list: $(echo "get_client_list $server" | nvidia-cuda-mps-control | tr '\n' ' ')"

nvidia-smi | sed -n '/Processes/,$p'
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$work/smi.csv" || true
"$gpureap" ps --json >"$work/ps.json" || true
"$gpureap" ps --color never || true

ps_ok=0
if CHECKS_DIR="$work" python3 - "$work/smi.csv" "$work/ps.json" "$server" "$target" "$bystander" <<'PY'
import json, os, sys
smi_path, ps_path = sys.argv[1], sys.argv[2]
server, target, bystander = (int(x) for x in sys.argv[3:6])
ps = json.load(open(ps_path))
rows = {p["pid"]: p for p in ps["processes"] if p["gpu"] == 0}
sys.path.insert(0, os.environ["CHECKS_DIR"])
import checks
from checks import check
def mps(pid):
    return (rows.get(pid) or {}).get("mps") or {}
check("gpureap lists the server", server in rows, f"(type {(rows.get(server) or {}).get('type')})")
check("gpureap calls it an MPS server", mps(server).get("role") == "server", f"({mps(server)})")
for name, pid in (("target", target), ("bystander", bystander)):
    r = rows.get(pid) or {}
    check(f"{name} listed as an MPS client (type M)", "M" in (r.get("type") or ""), f"(type {r.get('type')})")
    check(f"{name} tied to server {server}", mps(pid).get("server_pid") == server, f"({mps(pid)})")
    check(f"{name} identity ok", r.get("identity") == "ok", f"({r.get('identity')}: {r.get('identity_reason')})")
    check(f"{name} holds about 1 GiB", (r.get("gpu_memory_bytes") or 0) >= 2**30, f"({(r.get('gpu_memory_bytes') or 0) / 2**30:.2f} GiB)")
smi = [l.split(",")[0].strip() for l in open(smi_path) if l.strip()]
print(f"nvidia-smi --query-compute-apps PIDs: {smi} (on older MPS only the server appears here)")
sys.exit(0 if checks.ok else 1)
PY
then ps_ok=1; fi

echo; echo "== gpureap kill $target (through terminate_client) =="
kill_rc=0
"$gpureap" kill --yes --json --timeout 10 "$target" >"$work/kill.json" || kill_rc=$?
before=$(grep -c OK "$work/bystander.log" || true)
sleep 4
after=$(grep -c OK "$work/bystander.log" || true)
if CHECKS_DIR="$work" python3 - "$work/kill.json" "$kill_rc" "$server" "$target" "$before" "$after" "$work/bystander.log" <<'PY'
import json, os, sys
report, rc = json.load(open(sys.argv[1])), int(sys.argv[2])
server, target, before, after = (int(x) for x in sys.argv[3:7])
log = open(sys.argv[7]).read()
sys.path.insert(0, os.environ["CHECKS_DIR"])
import checks
from checks import check
def alive(p):
    try:
        return open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
check("kill exit status 0", rc == 0, f"(exit {rc})")
check("terminate_client went first", any("terminate_client" in n for n in report.get("notes", [])), f"({report.get('notes')})")
check("target ended", not alive(target))
check("server still runs", alive(server))
check("bystander still computes", after > before, f"({before} -> {after} checks)")
check("bystander never failed", "FAIL" not in log)
gpu = report["gpus"][0] if report["gpus"] else {}
check("memory release verified", gpu.get("verified") is True, f"(freed {(gpu.get('freed_bytes') or 0) / 2**30:.2f} GiB)")
sys.exit(0 if checks.ok else 1)
PY
then kill_ok=1; else kill_ok=0; fi
echo "get_server_status: $(echo "get_server_status $server" | nvidia-cuda-mps-control)"
[ "$ps_ok" = 1 ] && [ "$kill_ok" = 1 ]
