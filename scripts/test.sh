#!/usr/bin/env bash
# Builds gpureap and runs every test under AddressSanitizer and UndefinedBehaviorSanitizer (with
# clang), runs each fuzzer briefly, and builds the release program with gcc (beside the tests),
# packages it (.deb, .rpm, tarball; its program linked against Debian 11's glibc), checks the
# packages, installs the .deb and runs the installed binary on a simulated GPU, runs the
# tarball's in a Debian 11 chroot (scripts/old-glibc-check.sh). The release program is built as
# a packager builds it (gcc -O3 with Debian's hardening flags, warnings as errors), so both of
# Debian's compilers are proven to build the code. Tests that need root (users, PID namespaces,
# cgroups, installing the package) skip with the reason when run unprivileged; when CI runs as
# root (CI=true), a skip that tests/ci-allowed-skips.txt does not name fails the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
start=$SECONDS
cpu_log=$(mktemp)
trap 'rm -f "$cpu_log"' EXIT
# Each step's start says the wall time so far and the CPU the finished steps used (bash's
# `times`: the programs this script has waited for), so that a CI log shows where time went.
step() {
  times >"$cpu_log"
  echo "== $1 ($((SECONDS - start)) s; CPU of the steps before: $(tail -1 "$cpu_log" | awk '{print $1 " user, " $2 " system"}'))"
}

step "AddressSanitizer + UndefinedBehaviorSanitizer build (clang)"
CC=clang CXX=clang++ "$root/scripts/build.sh" asan

# The release program is built with gcc while the tests and the fuzzers run, at the lowest
# priority: the tests mostly wait on real processes, and the build takes only the CPU they
# leave. As root, package.sh builds it (no tests) in build/ with the packager's flags and
# packages it. Others build the release program, then compile the code with the packager's flags
# (scripts/compile-check.sh, linking nothing).
release_log=$(mktemp)
# (A command line for bash -c, where $1 is the checkout.)
# shellcheck disable=SC2016
if [ "$(id -u)" -eq 0 ]; then
  release='"$1/scripts/package.sh"'
  export GPUREAP_PACKAGE_DIR=$root/build
else
  release='"$1/scripts/build.sh" release && "$1/scripts/compile-check.sh" "$1/build-compile-check"'
fi
step "release build (gcc), in the background: ${release//\$1/$root}"
# (A session of its own, so that a failing test run ends the whole build with it.)
# Its session is an autogroup of its own, which the scheduler shares the CPU with by the group's
# nice, whatever its processes' nice: the build's shell sets that too, once in its session.
CC=gcc CXX=g++ setsid nice -n 19 bash -c "echo 19 >/proc/self/autogroup 2>/dev/null; $release" release "$root" \
  >"$release_log" 2>&1 </dev/null &
release_pid=$!
# (|| true: under set -e a failing command in the trap, the build long gone, would end the
# script with status 1 after a passing run.)
trap 'kill -- "-$release_pid" 2>/dev/null || true; rm -f "$release_log" "$cpu_log"' EXIT

step "tests"
# The tests mostly wait on real processes, so run more of them than there are cores.
status=0
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/build-asan" --output-on-failure -j "$(( $(nproc) * 2 ))" || status=$?
if [ "${CI:-}" = true ] && [ "$(id -u)" -eq 0 ]; then
  "$root/scripts/check-skips.sh" "$root/build-asan" || status=1
else
  "$root/scripts/check-skips.sh" "$root/build-asan" --list || true
fi
[ "$status" -eq 0 ] || exit "$status"

if grep -q '^GPUREAP_FUZZ:BOOL=ON' "$root/build-asan/CMakeCache.txt"; then
  step "fuzzing, a few seconds per target (scripts/fuzz.sh SECONDS for longer runs)"
  GPUREAP_FUZZ_BUILD_DIR="$root/build-asan" "$root/scripts/fuzz.sh" "${GPUREAP_FUZZ_SECONDS:-2}"
else
  echo "fuzzing skipped: the libFuzzer targets need clang"
fi

step "release build (gcc): waiting for it"
# Nothing else runs now: back to the normal priority (root may raise it again; others keep 19).
renice -n 0 -g "$release_pid" >/dev/null 2>&1 || true
echo 0 >"/proc/$release_pid/autogroup" 2>/dev/null || true
if ! wait "$release_pid"; then
  cat "$release_log" >&2
  echo "test.sh: the release build with gcc failed (its output above)" >&2
  exit 1
fi
cat "$release_log"
if [ "$(id -u)" -eq 0 ]; then
  step "packages: check the .deb, .rpm and tarball, the program's glibc floor; install, run on a simulated GPU, remove"
  # The simulator comes from the sanitizer build, which never instruments it: not built twice.
  GPUREAP_SIM_BUILD_DIR="$root/build-asan" "$root/scripts/package-check.sh"
  step "the tarball's program on an older system: Debian 11's glibc 2.31 in a chroot"
  old_status=0
  GPUREAP_PACKAGE_DIR=$root/build GPUREAP_SIM_BUILD_DIR="$root/build-asan" "$root/scripts/old-glibc-check.sh" ||
    old_status=$?
  # (77: skipped, the reason printed; package.sh made the Debian 11 root, so CI expects none.)
  if [ "$old_status" -ne 0 ] && { [ "$old_status" -ne 77 ] || [ "${CI:-}" = true ]; }; then exit "$old_status"; fi
else
  echo "the package check needs root: skipped"
fi
step "done"
