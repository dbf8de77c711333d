#!/usr/bin/env bash
# Benchmark (issue 30): the peak resident memory of every command that reads a saved kernel
# log, on a generated log of MB megabytes (default 200) holding EVENTS Xid lines (default
# 2,000,000, on two GPUs, three kinds) among ordinary lines, and whether each counted all of
# them. No driver (GPUREAP_NVML_LIBRARY=/nonexistent): the figures are the log's.
#   export --once --kernel-log LOG      peak RSS from /usr/bin/time; the sum of gpureap_xid_events_total
#   watch --listen --kernel-log LOG     VmHWM once its /metrics counts every event
#   doctor --kernel-log LOG             peak RSS; the counts in its findings
# Goal: under 32 MiB for export and watch, every event counted, doctor's counts whole.
# Usage: bench/kernel_log_memory.sh [MB] [EVENTS]
#        GPUREAP_BUILD=<build dir> picks the build (default ./build, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUREAP_BUILD:-$root/build}
mb=${1:-200}
events=${2:-2000000}
[[ "$mb" =~ ^[1-9][0-9]*$ && "$events" =~ ^[0-9]+$ ]] || { echo "bench: MB and EVENTS must be numbers" >&2; exit 2; }
[ -x "$build/src/gpureap" ] && [ -f "$build/src/gpureap-http.so" ] || "$root/scripts/build.sh" release >/dev/null
gpureap="$build/src/gpureap"
state=$(mktemp -d)
watch_pid=""
trap '[ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null; rm -rf "$state"' EXIT
export GPUREAP_NVML_LIBRARY=/nonexistent
log="$state/kern.log"
python3 - "$log" "$mb" "$events" <<'PY'
import sys
path, mb, events = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = mb * 1000 * 1000
xid = "[{t:>7}.000001] NVRM: Xid (PCI:0000:{bus}:00): {x}, pid={pid}, name=python3, Ch 00000010, intr 00000000.\n"
other = "[{t:>7}.000002] usb 1-1: new high-speed USB device number {n} using xhci_hcd\n"
with open(path, "w") as out:
    written = 0
    for i in range(events):
        line = xid.format(t=1000 + i // 1000, bus="3b" if i % 2 else "5e", x=(13, 31, 43)[i % 3], pid=4000 + i % 50)
        out.write(line); written += len(line)
    n = 0
    while written < size:
        line = other.format(t=1000 + n // 1000, n=n % 128)
        out.write(line); written += len(line); n += 1
PY
echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(basename "$build") build"
echo "log: $(du -m "$log" | cut -f1) MiB, $(wc -l <"$log") lines, $events Xid events"
xid_total() { awk '/^gpureap_xid_events_total/ { s += $NF } END { printf "%d\n", s }'; }

/usr/bin/time -f %M -o "$state/peak" "$gpureap" export --once --kernel-log "$log" >"$state/export.out" 2>"$state/export.err" || true
echo "export --once: peak $(( $(tail -1 "$state/peak") / 1024 )) MiB, counted $(xid_total <"$state/export.out") events"

printf '[[rule]]\nname = "log-old"\ncondition = "over-age"\nolder_than = "1h"\naction = "log"\n' >"$state/policy.toml"
"$gpureap" watch --policy "$state/policy.toml" --interval 1s --listen 127.0.0.1:0 --kernel-log "$log" \
  </dev/null >/dev/null 2>"$state/watch.err" &
watch_pid=$!
url=""
for _ in $(seq 1 600); do
  url=$(sed -n 's/.*serving \(http:[^ ]*\)$/\1/p' "$state/watch.err")
  if [ -n "$url" ]; then
    counted=$(curl -s "$url" | xid_total)
    [ "$counted" = "$events" ] && break
  fi
  sleep 0.5
done
echo "watch --listen: peak $(( $(awk '/^VmHWM/ { print $2 }' "/proc/$watch_pid/status") / 1024 )) MiB, counted ${counted:-0} events"
kill "$watch_pid"
wait "$watch_pid" || true
watch_pid=""

/usr/bin/time -f %M -o "$state/peak" "$gpureap" doctor --kernel-log "$log" >"$state/doctor.out" 2>&1 || true
echo "doctor: peak $(( $(tail -1 "$state/peak") / 1024 )) MiB; its Xid findings:"
grep -o 'Xid [0-9]* ([^)]*), [0-9]* times' "$state/doctor.out" | sed 's/^/  /'
grep 'Note:.*Xid' "$state/doctor.out" | sed 's/^/  /' || true
