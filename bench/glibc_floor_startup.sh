#!/usr/bin/env bash
# Benchmark: what linking the release program against Debian 11's glibc (GPUREAP_GLIBC_SYSROOT)
# costs every start. The reference is the same objects linked as before against this host's
# glibc (static libgcc, no glibc stand-ins), made here from the build's own link command. Both
# are stripped; each runs `--version` RUNS times under LD_DEBUG=statistics (the dynamic loader's
# start-up, in cycles: the floor build maps libpthread.so.0, libdl.so.2 and libgcc_s.so.1 too)
# and in one hyperfine session. Prints minima, medians and ratios (floor / reference).
# Usage: bench/glibc_floor_startup.sh [RUNS (default 300)]
#        GPUREAP_BUILD=<release build dir linked with GPUREAP_GLIBC_SYSROOT> (default ./build-release)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-300}
build=${GPUREAP_BUILD:-$root/build-release}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "bench: RUNS must be a positive number (got '$runs')" >&2; exit 2; }
grep -q '^GPUREAP_GLIBC_SYSROOT:PATH=/' "$build/CMakeCache.txt" 2>/dev/null ||
  { echo "bench: $build is not linked against an older glibc (scripts/package.sh makes one)" >&2; exit 2; }
command -v hyperfine >/dev/null || { echo "bench: hyperfine is not installed (scripts/setup-deps.sh)" >&2; exit 2; }
ninja -C "$build" gpureap >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The reference: the link command less the sysroot, its -B/-L, the stand-ins, -shared-libgcc.
link=$(cd "$build" && ninja -t commands src/gpureap | tail -1)
link=$(sed -E -e 's/--sysroot=[^ ]+|-B[^ ]+sysroot[^ ]+|-L[^ ]+sysroot[^ ]+|[^ ]+glibc_compat\.cpp\.o|[^ ]+realtime_cond_wait\.cpp\.o//g' \
  -e 's/-shared-libgcc/-static-libgcc/' -e "s| -o src/gpureap | -o $work/reference |" <<<"$link")
(cd "$build" && eval "$link")
strip -o "$work/floor" "$build/src/gpureap"
strip -o "$work/reference" "$work/reference"

loader_cycles() {  # loader_cycles PROGRAM: min and median of the loader's start-up cycles
  for _ in $(seq 1 "$runs"); do
    LD_DEBUG=statistics "$1" --version 2>&1 >/dev/null | sed -n 's/.*total startup time in dynamic loader: \([0-9]*\) cycles.*/\1/p'
  done | sort -n | awk '{ v[NR] = $1 } END { print v[1], v[int((NR + 1) / 2)] }'
}
read -r ref_min ref_median < <(loader_cycles "$work/reference")
read -r floor_min floor_median < <(loader_cycles "$work/floor")
hyperfine -N --style none --warmup 20 --runs "$runs" --export-json "$work/times.json" \
  -n reference "$work/reference --version" -n floor "$work/floor --version" >/dev/null 2>&1
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $runs runs each"
echo "NEEDED, reference: $(objdump -p "$work/reference" | awk '$1 == "NEEDED" { printf "%s ", $2 }')"
echo "NEEDED, floor:     $(objdump -p "$work/floor" | awk '$1 == "NEEDED" { printf "%s ", $2 }')"
echo "glibc floor: reference $("$root/scripts/glibc-floor.sh" "$work/reference" | sed -n '1s/.* needs glibc \([0-9.]*\):.*/\1/p')," \
  "floor $("$root/scripts/glibc-floor.sh" "$work/floor" | sed -n '1s/.* needs glibc \([0-9.]*\):.*/\1/p')"
awk -v a="$ref_min" -v b="$floor_min" -v c="$ref_median" -v d="$floor_median" 'BEGIN {
  printf "dynamic loader start-up, cycles: reference min %d median %d; floor min %d median %d; ratio min %.2f, median %.2f\n",
    a, c, b, d, b / a, d / c }'
python3 - "$work/times.json" <<'EOF'
import json, statistics, sys
results = {r["command"]: sorted(r["times"]) for r in json.load(open(sys.argv[1]))["results"]}
ref, floor = results["reference"], results["floor"]
p10 = lambda t: t[len(t) // 10]
print("--version, wall: reference p10 %.2f ms median %.2f ms; floor p10 %.2f ms median %.2f ms; ratio p10 %.2f, median %.2f"
      % (p10(ref) * 1e3, statistics.median(ref) * 1e3, p10(floor) * 1e3, statistics.median(floor) * 1e3,
         p10(floor) / p10(ref), statistics.median(floor) / statistics.median(ref)))
EOF
