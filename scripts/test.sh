#!/usr/bin/env bash
# Builds gpureap and runs every test, under AddressSanitizer and UndefinedBehaviorSanitizer,
# then builds the release program users run. Tests that need root (users, PID namespaces,
# cgroups) skip with the reason when run unprivileged.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
start=$SECONDS

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build"
"$root/scripts/build.sh" asan
echo "== tests (built $((SECONDS - start)) s in)"
# The tests mostly wait on real processes, so run more of them than there are cores.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/build-asan" --output-on-failure -j "$(( $(nproc) * 2 ))"

echo "== release build"
"$root/scripts/build.sh" release
"$root/build/src/gpureap" --version
echo "== done in $((SECONDS - start)) s"
