#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/*_fuzz.cpp) for SECONDS each on a copy of its seed corpus
# (fuzz/corpus/<name>/), as many at once as there are cores, and prints the executions each reached.
# Exit status 1 when any target crashed, leaked, hung or broke a property; its input is kept.
#
#   scripts/fuzz.sh SECONDS [TARGET...]      e.g. scripts/fuzz.sh 5, scripts/fuzz.sh 60 proc_stat
#
# Environment:
#   GPUREAP_FUZZ_BUILD_DIR   a build dir configured with -DGPUREAP_FUZZ=ON (CI's test build);
#                            default build-fuzz, configured here (clang, ASan+UBSan, no tests)
#   GPUREAP_FUZZ_ARTIFACTS   where crashing inputs and logs go (default fuzz-artifacts)
#   GPUREAP_FUZZ_JOBS        build parallelism (default 2)
set -euo pipefail

usage() { echo "usage: $0 SECONDS [TARGET...]   (see docs/fuzzing.md)" >&2; exit 2; }
[[ $# -ge 1 && $1 =~ ^[1-9][0-9]*$ ]] || usage
seconds=$1
shift

root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUREAP_FUZZ_BUILD_DIR:-$root/build-fuzz}
artifacts=${GPUREAP_FUZZ_ARTIFACTS:-$root/fuzz-artifacts}
jobs=${GPUREAP_FUZZ_JOBS:-2}

if [[ ! -f $build/CMakeCache.txt ]]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUREAP_FUZZ=ON -DGPUREAP_SANITIZE=ON -DGPUREAP_WERROR=ON -DGPUREAP_BUILD_TESTS=OFF "${launcher[@]}" >/dev/null
elif ! grep -q '^GPUREAP_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "$0: $build was configured without -DGPUREAP_FUZZ=ON; reconfigure it or unset GPUREAP_FUZZ_BUILD_DIR" >&2
  exit 2
fi
cmake --build "$build" --target gpureap_fuzz -j "$jobs" >/dev/null

# Longest input per target: a little above the largest real file of its kind.
max_len() {
  case $1 in
    proc_stat | proc_cgroup | kill_config | sanitize) echo 4096 ;;
    proc_status | mountinfo) echo 16384 ;;
    kernel_log) echo 65536 ;;
    process_records) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  targets=()
  for source in "$root"/fuzz/*_fuzz.cpp; do
    name=$(basename "$source" _fuzz.cpp)
    targets+=("$name")
  done
fi

mkdir -p "$artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# One target: its libFuzzer run, then its status in $work/<name>.status.
run_target() {
  local name=$1 binary=$build/fuzz/${1}_fuzz corpus=$work/$1 status=0
  mkdir -p "$corpus"
  [[ -d $root/fuzz/corpus/$name ]] && cp -r "$root/fuzz/corpus/$name/." "$corpus/"
  "$binary" -max_total_time="$seconds" -max_len="$(max_len "$name")" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$name-" \
    "$corpus" >"$artifacts/$name.log" 2>&1 || status=$?
  echo "$status" >"$work/$name.status"
}

# As many targets at once as there are cores: each is one single-threaded process, and CI's
# few seconds per target otherwise add up one after the other.
parallel=$(nproc)
running=0
for name in "${targets[@]}"; do
  [[ -x $build/fuzz/${name}_fuzz ]] || continue
  run_target "$name" &
  running=$((running + 1))
  if [[ $running -ge $parallel ]]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=()
printf '%-18s %12s %8s  %s\n' target executions exec/s result
for name in "${targets[@]}"; do
  if [[ ! -x $build/fuzz/${name}_fuzz ]]; then
    printf '%-18s %12s %8s  %s\n' "$name" - - "not built (its module is missing; fuzz/CMakeLists.txt)"
    continue
  fi
  log=$artifacts/$name.log
  status=$(cat "$work/$name.status")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [[ $status -eq 0 ]]; then
    result=ok
  else
    result="FAILED (exit $status): $(grep -m1 -E 'ERROR|property violated|Test unit written' "$log" || true)"
    failed+=("$name")
  fi
  printf '%-18s %12s %8s  %s\n' "$name" "${runs:-?}" "${rate:-?}" "$result"
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzzing found problems in: ${failed[*]}; inputs and logs in $artifacts" >&2
  echo "reproduce: $build/fuzz/<target>_fuzz $artifacts/<target>-crash-<hash>" >&2
  exit 1
fi
