#!/usr/bin/env bash
# Builds gpureap and runs every test: once normally, once under AddressSanitizer and
# UndefinedBehaviorSanitizer. Tests that need root (users, PID namespaces, cgroups) skip
# with the reason when run unprivileged.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)

echo "== release build and tests"
"$root/scripts/build.sh" release
ctest --test-dir "$root/build" --output-on-failure -j "$jobs"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
"$root/scripts/build.sh" asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/build-asan" --output-on-failure -j "$jobs"
