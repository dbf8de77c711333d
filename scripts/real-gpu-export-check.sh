#!/usr/bin/env bash
# Checks `gpureap export` and a dry-run `gpureap watch` against a real NVIDIA GPU (needs the
# driver, nvidia-smi and PyTorch). A process holds ~3 GiB on GPU 0 and then idles; the checks:
#   - every GPU's memory total/used/free on the exporter within 1 % of nvidia-smi --query-gpu
#     (or 2 MiB, nvidia-smi's granularity being 1 MiB);
#   - the holder's series gpureap_process_gpu_memory_bytes (--per-process) with its pid and
#     user, its value within 1 % (or 2 MiB) of nvidia-smi --query-compute-apps;
#   - a dry-run watch policy with an idle rule matches the idle holder (event=would-terminate,
#     mode=dry-run), and the holder is still alive afterwards.
# It never resets or reconfigures the GPU; the only processes it signals are the ones it
# started (the holder, the watch daemon). Prints PASS/FAIL lines and a summary; exits 1 when a
# check failed, 2 when it cannot run. Takes about 30 s (under 2 minutes).
#
# Testable without a GPU (tests/deploy/real-gpu-export-check-sim.sh runs it on the simulator):
#   GPUREAP                      the gpureap binary (default build/src/gpureap, built if missing)
#   GPUREAP_CHECK_HOLDER         the holder's command, words split on spaces (default: PyTorch);
#                                it must take its memory on GPU 0, print a line starting with
#                                READY, then idle; its PID is the process started
#   GPUREAP_CHECK_IDLE_FOR       the idle rule's idle_for (default 10s)
#   nvidia-smi is the first one on PATH; GPUREAP_NVML_LIBRARY and GPUREAP_DEV_DIR pass through.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gpureap=${GPUREAP:-$root/build/src/gpureap}
idle_for=${GPUREAP_CHECK_IDLE_FOR:-10s}
[ -x "$gpureap" ] || "$root/scripts/build.sh" release >/dev/null
command -v nvidia-smi >/dev/null || { echo "real-gpu-export-check: nvidia-smi not found" >&2; exit 2; }
command -v python3 >/dev/null || { echo "real-gpu-export-check: python3 not found" >&2; exit 2; }
if [ -z "${GPUREAP_CHECK_HOLDER:-}" ]; then
  python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
    { echo "real-gpu-export-check: PyTorch with CUDA not available" >&2; exit 2; }
fi

work=$(mktemp -d)
holder="" watcher=""
cleanup() {
  [ -n "$watcher" ] && kill -TERM "$watcher" 2>/dev/null || true
  [ -n "$holder" ] && kill -KILL "$holder" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/hold.py" <<'PY'
import os, time, torch
x = torch.empty(3 * 1024**3, dtype=torch.uint8, device="cuda:0")
x.fill_(1)
torch.cuda.synchronize()
print(f"READY {os.getpid()}", flush=True)
time.sleep(600)  # idle: no kernels, no CPU
PY
if [ -n "${GPUREAP_CHECK_HOLDER:-}" ]; then
  read -r -a holder_argv <<<"$GPUREAP_CHECK_HOLDER"
else
  holder_argv=(python3 "$work/hold.py")
fi
"${holder_argv[@]}" >"$work/ready" 2>"$work/holder.err" </dev/null &
holder=$!
for _ in $(seq 1 240); do grep -q '^READY' "$work/ready" 2>/dev/null && break; sleep 0.25; done
grep -q '^READY' "$work/ready" || { echo "real-gpu-export-check: the holder did not start:"; cat "$work/holder.err"; exit 1; }

# The driver's figures on both sides of one collection: a figure must match one of them.
smi_gpus() { nvidia-smi --query-gpu=index,uuid,memory.total,memory.used,memory.free --format=csv,noheader,nounits; }
smi_apps() { nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits; }
smi_gpus >"$work/gpus.before"
smi_apps >"$work/apps.before"
export_rc=0
"$gpureap" export --once --per-process --no-kernel-log >"$work/metrics" 2>"$work/export.err" || export_rc=$?
smi_gpus >"$work/gpus.after"
smi_apps >"$work/apps.after"

# A dry-run policy: the idle rule must announce the idle holder and signal nothing.
cat >"$work/policy.toml" <<EOF
mode = "dry-run"
interval = "500ms"
full_scan_interval = "5s"
[[rule]]
name = "idle-check"
condition = "idle"
idle_for = "$idle_for"
action = "terminate"
grace = "0s"
EOF
watch_log=$work/watch.log
"$gpureap" watch --policy "$work/policy.toml" 2>"$watch_log" </dev/null >/dev/null &
watcher=$!
matched=0
for _ in $(seq 1 240); do  # up to 60 s: idle_for plus a few looks
  if grep -q "event=would-terminate .*pid=$holder\b" "$watch_log" 2>/dev/null; then matched=1; break; fi
  kill -0 "$watcher" 2>/dev/null || break
  sleep 0.25
done
kill -TERM "$watcher" 2>/dev/null || true
watch_rc=0
wait "$watcher" || watch_rc=$?
watcher=""
holder_alive=0
kill -0 "$holder" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$holder/stat" 2>/dev/null)" != Z ] && holder_alive=1

python3 - "$work" "$holder" "$(id -un)" "$export_rc" "$matched" "$watch_rc" "$holder_alive" <<'PY'
import re, sys
work, holder, user = sys.argv[1], int(sys.argv[2]), sys.argv[3]
export_rc, matched, watch_rc, alive = (int(a) for a in sys.argv[4:8])
MiB = 1024 * 1024
ok = True
def check(name, cond, detail=""):
    global ok
    ok &= bool(cond)
    print(f"{'PASS' if cond else 'FAIL'}  {name:<58} {detail}")

def within(a, b):  # 1 %, or 2 MiB: nvidia-smi rounds to whole MiB
    return abs(a - b) <= max(0.01 * b, 2 * MiB)

def read_metrics(path):
    samples = []
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in open(path):
        m = line_re.match(line)
        if m and not line.startswith("#"):
            samples.append((m.group(1), dict(label_re.findall(m.group(2) or "")), float(m.group(3))))
    return samples

def smi_rows(name):
    return [[f.strip() for f in l.split(",")] for l in open(f"{work}/{name}") if l.strip()]

check("gpureap export --once --per-process", export_rc == 0, f"(exit {export_rc})")
samples = read_metrics(f"{work}/metrics")
def value(metric, **labels):
    found = [v for n, l, v in samples if n == metric and all(l.get(k, "").lower() == str(w).lower() for k, w in labels.items())]
    return found[0] if len(found) == 1 else None

for field, column in (("total", 2), ("used", 3), ("free", 4)):
    before, after = smi_rows("gpus.before"), smi_rows("gpus.after")
    for row_before, row_after in zip(before, after):
        index, uuid = row_before[0], row_before[1]
        ours = value(f"gpureap_gpu_memory_{field}_bytes", uuid=uuid)
        if ours is None:
            ours = value(f"gpureap_gpu_memory_{field}_bytes", gpu=index)
        smi = [int(r[column]) * MiB for r in (row_before, row_after) if r[column].isdigit()]
        check(f"GPU {index} memory {field} within 1 % of nvidia-smi", ours is not None and any(within(ours, s) for s in smi),
              f"(gpureap {ours / MiB if ours is not None else 'none'} MiB, nvidia-smi {[s // MiB for s in smi]} MiB)")

series = [(l, v) for n, l, v in samples if n == "gpureap_process_gpu_memory_bytes" and l.get("pid") == str(holder)]
check("the holder has a per-process series", len(series) >= 1, f"(pid {holder}, {len(series)} series)")
if series:
    labels, ours = series[0]
    check("its user label is the holder's user", labels.get("user") == user, f"({labels.get('user')!r}, want {user!r})")
    smi = [int(r[2]) * MiB for f in ("apps.before", "apps.after") for r in smi_rows(f) if r[0] == str(holder) and r[2].isdigit()]
    check("its memory within 1 % of nvidia-smi --query-compute-apps", any(within(ours, s) for s in smi),
          f"(gpureap {ours / MiB:.0f} MiB, nvidia-smi {[s // MiB for s in smi]} MiB)")
    check("the holder holds at least 1 GiB", ours >= 1024 * MiB, f"({ours / MiB:.0f} MiB)")

log = open(f"{work}/watch.log").read().splitlines()
would = [l for l in log if "event=would-terminate" in l and re.search(rf"\bpid={holder}\b", l)]
check("watch (dry-run idle rule) announces the idle holder", matched and would, f"({len(would)} would-terminate line(s))")
if would:
    check("  ...as a dry run", "mode=dry-run" in would[0] or "dry run" in would[0], would[0][:160])
check("watch signalled nothing (no event=terminate)", not any("event=terminate " in l for l in log))
check("watch stopped cleanly on SIGTERM", watch_rc == 0, f"(exit {watch_rc})")
check("the holder is still alive", alive == 1, f"(pid {holder})")
if not ok:
    print("--- watch log ---\n" + "\n".join(log[-20:]))
    print("--- export stderr ---\n" + open(f"{work}/export.err").read())
print(f"real-gpu-export-check: {'every check passed' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PY
