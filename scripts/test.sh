#!/usr/bin/env bash
# Builds gpureap and runs every test under AddressSanitizer and UndefinedBehaviorSanitizer (with
# clang), runs each fuzzer briefly, then builds the release program with gcc, packages it as a
# .deb, installs that and runs the installed binary on a simulated GPU: both of Debian's
# compilers build it with warnings as errors. Tests that need root (users, PID namespaces,
# cgroups, installing the package) skip with the reason when run unprivileged; when CI runs as
# root (CI=true), a skip that tests/ci-allowed-skips.txt does not name fails the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
start=$SECONDS
step() { echo "== $1 ($((SECONDS - start)) s)"; }

step "AddressSanitizer + UndefinedBehaviorSanitizer build (clang)"
CC=clang CXX=clang++ "$root/scripts/build.sh" asan

step "tests"
# The tests mostly wait on real processes, so run more of them than there are cores.
status=0
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/build-asan" --output-on-failure -j "$(( $(nproc) * 2 ))" || status=$?
if [ "${CI:-}" = true ] && [ "$(id -u)" -eq 0 ]; then
  "$root/scripts/check-skips.sh" "$root/build-asan" || status=1
fi
[ "$status" -eq 0 ] || exit "$status"

if grep -q '^GPUREAP_FUZZ:BOOL=ON' "$root/build-asan/CMakeCache.txt"; then
  step "fuzzing, a few seconds per target (scripts/fuzz.sh SECONDS for longer runs)"
  GPUREAP_FUZZ_BUILD_DIR="$root/build-asan" "$root/scripts/fuzz.sh" "${GPUREAP_FUZZ_SECONDS:-2}"
else
  echo "fuzzing skipped: the libFuzzer targets need clang"
fi

if [ "$(id -u)" -eq 0 ]; then
  # package.sh builds the release program (no tests) in build/, as the quick start does, and
  # package-check.sh adds the simulator it runs the installed binary against.
  step "release build (gcc) and Debian package: build, check, install, run on a simulated GPU, remove"
  export CC=gcc CXX=g++
  GPUREAP_PACKAGE_DIR="$root/build" "$root/scripts/package.sh"
  # The simulator comes from the sanitizer build, which never instruments it: not built twice.
  GPUREAP_PACKAGE_DIR="$root/build" GPUREAP_SIM_BUILD_DIR="$root/build-asan" "$root/scripts/package-check.sh"
else
  step "release build (gcc; the package check needs root: skipped)"
  CC=gcc CXX=g++ "$root/scripts/build.sh" release
fi
step "done"
