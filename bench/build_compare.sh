#!/usr/bin/env bash
# Benchmark: two builds side by side in one run (a branch against the main it left), on the
# host of bench/holder_events.sh, events on: a fresh scrape of `gpureap export` (--cache 0,
# --reconcile 1h; with the simulated driver and without it), its CPU per scrape from
# /proc/<pid>/stat (scrapes alternate between the builds in rounds of 10) and its system calls
# (strace -c of 10 scrapes); then both builds' `gpureap watch` at once (1 s looks,
# sim_host_watch_policy's policy), CPU over WATCH_SECONDS and system calls per look (strace -c
# of 10 s each). CPU time and system calls are what to compare on a loaded machine.
# Setup: 8 simulated GPUs (r550), 64 GPU processes, 2,000 other processes. Root (events).
# Usage: bench/build_compare.sh BASE_BUILD NEW_BUILD [SCRAPES (default 200)] [WATCH_SECONDS (default 120)]
#        (each build directory holds src/gpureap and src/gpureap-http.so; the simulated host is
#        NEW_BUILD's, and each build's gpureap loads its own build's simulated driver where it has
#        one, sim/drivers/r550/libnvidia-ml.so.1: a change of the driver is compared too)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { echo "usage: bench/build_compare.sh BASE_BUILD NEW_BUILD [SCRAPES] [WATCH_SECONDS]" >&2; exit 2; }
base=$1 new=$2 n=${3:-200} watch_seconds=${4:-120}
for x in "$n" "$watch_seconds"; do
  [[ "$x" =~ ^[1-9][0-9]*$ ]] || { echo "bench: SCRAPES and WATCH_SECONDS are positive numbers (got '$x')" >&2; exit 2; }
done
n=$(( (n + 9) / 10 * 10 ))  # whole rounds of 10
[ "$(id -u)" = 0 ] || { echo "bench: needs root (fanotify and the process-events connector)" >&2; exit 2; }
for b in "$base" "$new"; do
  [ -x "$b/src/gpureap" ] && [ -f "$b/src/gpureap-http.so" ] || { echo "bench: no gpureap in $b/src" >&2; exit 2; }
done
for tool in curl strace bc; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not installed" >&2; exit 2; }
done
build=$new
source "$root/bench/sim_host.sh"
sim_host_need_pids 2000
sim_host_begin
sim_host_gpu_processes 8 --alloc 1GiB --name /usr/bin/python3
sim_host_grow_others 2000
# The simulated driver a build's gpureap loads: its own, else NEW_BUILD's.
driver_of() { if [ -f "$1/sim/drivers/r550/libnvidia-ml.so.1" ]; then echo "$1/sim/drivers/r550/libnvidia-ml.so.1"; else echo "$GPUREAP_NVML_LIBRARY"; fi; }
start_exporter() {  # start_exporter BUILD NAME ARGS...
  local b=$1 name=$2; shift 2
  GPUREAP_NVML_LIBRARY=${NVML_OVERRIDE:-$(driver_of "$b")} "$b/src/gpureap" export --listen 127.0.0.1:0 --no-kernel-log "$@" </dev/null >/dev/null 2>"$state/$name.err" &
  exporter_pid=$!
  sim_host_kill_at_exit "$exporter_pid"
  url=""
  for _ in $(seq 1 400); do
    url=$(sed -n 's/.*serving \(http:[^ ]*\)$/\1/p' "$state/$name.err"); [ -n "$url" ] && break; sleep 0.05
  done
  [ -n "$url" ] || { cat "$state/$name.err" >&2; exit 1; }
  curl -s -o /dev/null "$url"
}
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
declare -A U P
for b in base new; do
  dir=${!b}
  start_exporter "$dir" "$b-drv" --cache 0 --reconcile 1h; U[$b-drv]=$url; P[$b-drv]=$exporter_pid
  NVML_OVERRIDE=/nonexistent start_exporter "$dir" "$b-nod" --cache 0 --reconcile 1h; U[$b-nod]=$url; P[$b-nod]=$exporter_pid
done
printf 'host: %s cores, load average %s at the start; %s processes\n' "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(sim_host_process_count)"
declare -A t0
for k in "${!U[@]}"; do curl -s -o /dev/null "${U[$k]}"; t0[$k]=$(ticks "${P[$k]}"); : >"$state/wall-$k"; done
# Alternate in rounds of 10 on one kept-alive connection each.
for ((r = 0; r < n / 10; r++)); do
  for k in base-drv new-drv base-nod new-nod; do
    urls=(); for _ in 1 2 3 4 5 6 7 8 9 10; do urls+=(-o /dev/null "${U[$k]}"); done
    curl -s -w '%{time_total}\n' "${urls[@]}" >>"$state/wall-$k"
  done
done
hz=$(getconf CLK_TCK)
printf '\n%-34s %12s %12s %8s\n' "fresh scrape, events on" base new new/base
for v in drv nod; do
  cb=$(( $(ticks "${P[base-$v]}") - ${t0[base-$v]} )); cn=$(( $(ticks "${P[new-$v]}") - ${t0[new-$v]} ))
  wb=$(sort -n "$state/wall-base-$v" | awk '{a[NR]=$1} END {printf "%.2f", 1000*a[int((NR+1)/2)]}')
  wn=$(sort -n "$state/wall-new-$v" | awk '{a[NR]=$1} END {printf "%.2f", 1000*a[int((NR+1)/2)]}')
  label=$([ $v = drv ] && echo "with the simulated driver" || echo "without the driver")
  awk -v l="$label" -v cb="$cb" -v cn="$cn" -v n="$n" -v hz="$hz" -v wb="$wb" -v wn="$wn" 'BEGIN {
    printf "%-34s %12.2f %12.2f %8.3f\n", "CPU ms per scrape, " l, 1000*cb/hz/n, 1000*cn/hz/n, (cb>0? cn/cb : 0);
    printf "%-34s %12.2f %12.2f %8.3f\n", "wall ms (median), " l, wb, wn, (wb>0? wn/wb : 0) }'
done
# strace -c of 10 scrapes each, without the driver and with it: system calls per scrape.
for v in nod drv; do
  for b in base new; do
    strace -f -c -p "${P[$b-$v]}" -o "$state/sc-$b" 2>/dev/null & sp=$!
    sleep 1
    urls=(); for _ in $(seq 1 10); do urls+=(-o /dev/null "${U[$b-$v]}"); done
    curl -s "${urls[@]}"
    sleep 0.5; kill -INT $sp; wait $sp 2>/dev/null || true
    printf 'system calls per scrape (%s, strace -c of 10), %s: %s\n' "$([ $v = nod ] && echo "no driver" || echo "with the driver")" "$b" \
      "$(awk '$NF=="total" {print $4/10}' "$state/sc-$b")"
    grep -E 'readlinkat|openat|read$|close|getdents64|newfstatat|recvfrom|recvmmsg|pread64|fcntl' "$state/sc-$b" | awk '{printf "   %s %s\n", $NF, $4/10}' | head -10
  done
done
# Two watch daemons side by side: CPU over the window (the simulated driver's part from each
# daemon's own count at its stop, over its life), then a second pair traced over the same 10 s.
sim_host_watch_policy "$state/policy.toml"
start_watches() {  # start_watches TAG: both builds' daemons, P[TAG-base] and P[TAG-new]
  local b dir
  for b in base new; do
    dir=${!b}
    GPUREAP_NVML_LIBRARY=$(driver_of "$dir") "$dir/src/gpureap" watch --policy "$state/policy.toml" 2>"$state/watch-$1-$b.log" &
    P[$1-$b]=$!; sim_host_kill_at_exit "${P[$1-$b]}"
  done
  for b in base new; do
    for _ in $(seq 1 600); do grep -q 'event=start' "$state/watch-$1-$b.log" 2>/dev/null && break; sleep 0.05; done
  done
}
stop_watches() { kill -TERM "${P[$1-base]}" "${P[$1-new]}"; wait "${P[$1-base]}" "${P[$1-new]}" 2>/dev/null || true; }
declare -A T
start_watches w
born=$(date +%s.%N)
sleep 3
printf '\nwatch: load average %s at the start\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
for b in base new; do T[$b]=$(ticks "${P[w-$b]}"); done
s0=$(date +%s.%N); sleep "$watch_seconds"; s1=$(date +%s.%N)
for b in base new; do T[$b]=$(( $(ticks "${P[w-$b]}") - ${T[$b]} )); done
stop_watches w
died=$(date +%s.%N)
drv() { sed -n 's/.*event=stop .*driver_cpu_seconds=\([0-9.]*\).*/\1/p' "$state/watch-w-$1.log"; }
scans() { grep -c 'event=scan' "$state/watch-w-$1.log" || true; }
awk -v b="${T[base]}" -v n="${T[new]}" -v hz="$hz" -v w="$(echo "$s1 - $s0" | bc)" -v life="$(echo "$died - $born" | bc)" \
    -v db="$(drv base)" -v dn="$(drv new)" -v sb="$(scans base)" -v sn="$(scans new)" 'BEGIN {
  pb = 100*b/hz/w; pn = 100*n/hz/w; qb = 100*db/life; qn = 100*dn/life;
  printf "watch CPU over %.0f s, %% of a core: base %.3f, new %.3f, new/base %.3f\n", w, pb, pn, (pb>0 ? pn/pb : 0);
  printf "  the simulated driver (quick looks, over each life of %.0f s): base %.3f, new %.3f\n", life, qb, qn;
  printf "  gpureap itself: base %.3f, new %.3f, new/base %.3f\n", pb-qb, pn-qn, (pb-qb>0 ? (pn-qn)/(pb-qb) : 0);
  printf "  full scans logged: base %s, new %s\n", sb, sn }'
# Both traced over the same 10 s: the host's forks (the connector's events) and any full scan
# are the same for both.
start_watches t
sleep 3
declare -A S
for b in base new; do
  strace -f -c -p "${P[t-$b]}" -o "$state/sc-$b" 2>/dev/null & S[$b]=$!
done
sleep 10
for b in base new; do kill -INT "${S[$b]}"; wait "${S[$b]}" 2>/dev/null || true; done
stop_watches t
for b in base new; do
  printf '%s: system calls per look (10 s of strace -c): %s;' "$b" "$(awk '$NF=="total" {print $4/10}' "$state/sc-$b")"
  awk '$NF!="total" && NF>=5 && $4>=10 {printf " %s %s", $NF, $4/10}' "$state/sc-$b"; echo
done
printf 'load average %s at the end\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
