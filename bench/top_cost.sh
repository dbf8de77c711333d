#!/usr/bin/env bash
# Benchmark: what `gpureap top` costs while it is open, beside `watch -n1` of the simulated
# nvidia-smi, in one run on one host: 8 simulated GPUs held by 8 jobs with 4 forked workers
# each (40 holders, per-process utilization samples on), plus EXTRA sleeping processes. Both run
# in terminals of their own (a private tmux server) at a 1-second refresh for SECONDS after a
# warm-up; CPU is measured from /proc/PID/stat (utime + stime, and for watch also its waited-for
# children: the nvidia-smi runs), resident memory from /proc/PID/status.
# With NVITOP_SRC=<a source tree of nvitop with pynvml.py beside it> (nvitop cannot be installed
# from PyPI here; see docs/performance.md for making one from a mirror), nvitop runs beside them
# too, under /usr/bin/python3 (which needs python3-psutil).
# Usage: bench/top_cost.sh [SECONDS (default 30)] [EXTRA (default 2000)]
#        GPUREAP_BUILD=<build dir> picks the build (default ./build, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}
extra=${2:-2000}
build=${GPUREAP_BUILD:-$root/build}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "bench: SECONDS must be a positive number (got '$seconds')" >&2; exit 2; }
[[ "$extra" =~ ^[0-9]+$ ]] || { echo "bench: EXTRA must be a number (got '$extra')" >&2; exit 2; }
[ -x "$build/src/gpureap" ] && [ -x "$build/sim/gpusim-cuda" ] || "$root/scripts/build.sh" release >/dev/null
for tool in tmux watch python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool not installed (scripts/setup-deps.sh installs it)" >&2; exit 2; }
done

source "$root/bench/sim_host.sh"
sim_host_need_pids "$extra"
sim_host_begin
unset NO_COLOR  # top is measured as its users see it, in colour
socket="$state/tmux.sock"
stop_tmux() { tmux -S "$socket" kill-server 2>/dev/null; }
sim_host_at_exit stop_tmux
export GPUREAP_CONFIG="$state/config.toml"
: >"$GPUREAP_CONFIG"
# 8 jobs with 4 forked workers each, one per GPU, with per-process utilization samples.
sim_host_gpu_processes 1 --alloc 20GiB --workers 4 --sm-util 40
sim_host_grow_others "$extra"

# Two windows of one private server, each 120x40 without a status bar.
printf 'set -g status off\n' >"$state/tmux.conf"
tmux_() { tmux -S "$socket" -f "$state/tmux.conf" "$@"; }
tmux_ new-session -d -s bench -x 120 -y 40 -e LANG=C.UTF-8 -- "$build/src/gpureap" top --interval 1
# What people run instead: nvidia-smi's GPU table and its process table, every second. The
# simulated nvidia-smi answers the CSV queries, so the two tables are two queries.
tmux_ new-window -d -t bench -- watch -n1 -x sh -c \
  'nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw --format=csv
   nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv'
nvitop_pid=0
if [ -n "${NVITOP_SRC:-}" ]; then
  # The simulated driver through the loader path, as pynvml finds libnvidia-ml.so.1.
  tmux_ new-window -d -t bench -e LANG=C.UTF-8 -e PYTHONPATH="$NVITOP_SRC" \
    -e LD_LIBRARY_PATH="$(dirname "$GPUREAP_NVML_LIBRARY")" -- /usr/bin/python3 -m nvitop --monitor full --interval 1
  nvitop_pid=$(tmux_ display-message -p -t bench:2 '#{pane_pid}')
fi
export PATH="$build/sim/bin:$PATH"  # for the measurement of one nvidia-smi below
top_pid=$(tmux_ display-message -p -t bench:0 '#{pane_pid}')
watch_pid=$(tmux_ display-message -p -t bench:1 '#{pane_pid}')
for _ in $(seq 1 100); do tmux_ capture-pane -p -t bench:0 | grep -q "GPU 7 " && break; sleep 0.1; done
tmux_ capture-pane -p -t bench:0 | grep -q "GPU 7 " || { echo "bench: gpureap top showed no GPU 7:" >&2; tmux_ capture-pane -p -t bench:0 >&2; exit 1; }
sleep 3  # warm-up: the first refreshes load the driver and fill the user-name cache

procs=$(sim_host_process_count)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$top_pid" "$watch_pid" "$seconds" "$state" "$procs" "$load_start" "$(nproc)" "$nvitop_pid" <<'PY'
import os, subprocess, sys, time
top, watch, seconds, state, procs, load_start, cores, nvitop = sys.argv[1:9]
top, watch, seconds, nvitop = int(top), int(watch), int(seconds), int(nvitop)
tick = os.sysconf("SC_CLK_TCK")

def cpu(pid, children):
    # utime stime cutime cstime: fields 14-17 of stat, counted after the last ')'.
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    used = int(fields[11]) + int(fields[12])
    if children:
        used += int(fields[13]) + int(fields[14])
    return used / tick

def memory(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "Threads"):
            out[key] = int(value.split()[0])
    return out

start = time.monotonic()
t0, w0 = cpu(top, False), cpu(watch, True)
n0 = cpu(nvitop, True) if nvitop else 0
time.sleep(seconds)
elapsed = time.monotonic() - start
t1, w1 = cpu(top, False), cpu(watch, True)
n1 = cpu(nvitop, True) if nvitop else 0
tm, wm = memory(top), memory(watch)
nm = memory(nvitop) if nvitop else None
# One refresh of the nvidia-smi pair, for its peak resident memory.
smi = subprocess.run(["/usr/bin/time", "-f", "%M", "sh", "-c",
                      "nvidia-smi --query-gpu=index,memory.used --format=csv >/dev/null; "
                      "nvidia-smi --query-compute-apps=pid,used_memory --format=csv >/dev/null"],
                     capture_output=True, text=True)
smi_kib = int(smi.stderr.strip().splitlines()[-1])
load_end = open("/proc/loadavg").read().split()[:3]

def pct(used):
    return 100.0 * used / elapsed

print(f"host: {cores} cores, load average {load_start} at the start, {' '.join(load_end)} at the end; "
      f"{procs} processes; 8 simulated GPUs (r550), 40 GPU holders; {elapsed:.1f} s measured after a 3 s warm-up")
print(f"\n{'':34} {'CPU s':>7} {'% of a core':>12} {'RSS MiB':>8} {'peak MiB':>9}")
print(f"{'gpureap top --interval 1':34} {t1 - t0:>7.2f} {pct(t1 - t0):>12.2f} {tm['VmRSS'] / 1024:>8.1f} "
      f"{tm['VmHWM'] / 1024:>9.1f}   ({tm['Threads']} threads)")
print(f"{'watch -n1 nvidia-smi (2 queries)':34} {w1 - w0:>7.2f} {pct(w1 - w0):>12.2f} {wm['VmRSS'] / 1024:>8.1f} "
      f"{smi_kib / 1024:>9.1f}   (watch itself; peak = one nvidia-smi)")
if nm:
    print(f"{'nvitop 1.7.0 --interval 1':34} {n1 - n0:>7.2f} {pct(n1 - n0):>12.2f} {nm['VmRSS'] / 1024:>8.1f} "
          f"{nm['VmHWM'] / 1024:>9.1f}   ({nm['Threads']} threads)")
else:
    print("nvitop: not run (set NVITOP_SRC; it is not installable from PyPI here)")
goal_cpu, goal_rss = 2.0, 20.0
print(f"\ngoal (issue 11): gpureap top under {goal_cpu:.0f} % of one core and {goal_rss:.0f} MiB resident: "
      f"CPU {'met' if pct(t1 - t0) < goal_cpu else 'MISSED'} ({pct(t1 - t0):.2f} %), "
      f"memory {'met' if tm['VmHWM'] / 1024 < goal_rss else 'MISSED'} (peak {tm['VmHWM'] / 1024:.1f} MiB)")
PY
