#!/usr/bin/env bash
# Configures and builds one variant. Usage: scripts/build.sh [release|asan]
#   release  build/       optimised program and simulator, no tests (what users run)
#   asan     build-asan/  everything with the tests, under AddressSanitizer + UndefinedBehaviorSanitizer
# The compiler: CC/CXX when set; otherwise the release build uses Debian's default (gcc, as the
# README's install and Debian's packages do) and the asan build clang (it carries the libFuzzer
# targets and compiles this code about twice as fast). It says which it uses.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
variant=${1:-release}
# The release build needs only what building gpureap needs; the asan build carries the tests.
case "$variant" in asan) "$root/scripts/setup-deps.sh" test ;; *) "$root/scripts/setup-deps.sh" build ;; esac
if [ -z "${CXX:-}" ]; then
  if [ "$variant" = asan ] && command -v clang++ >/dev/null; then export CC=clang CXX=clang++; else export CC=cc CXX=c++; fi
fi
echo "build.sh: $variant build with $("$CXX" --version | head -1)"
case "$variant" in
  release)
    dir="$root/build"
    extra=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DGPUREAP_BUILD_TESTS=OFF)
    # With gcc, linked against Debian 11's C library where scripts/glibc-sysroot.sh has made
    # that root (package.sh makes it): the program then runs on glibc 2.28 and later.
    [[ $("$CXX" --version) == *clang* ]] || extra+=(-DGPUREAP_GLIBC_SYSROOT="$("$root/scripts/glibc-sysroot.sh" --if-cached)") ;;
  asan)
    dir="$root/build-asan"
    # -O0: the sanitizers find the same errors (nothing optimised away) and the build takes
    # little more than half the time, for a few seconds more test time (docs/performance.md).
    # Line tables only: enough for their stack traces.
    debug_flags="-O0 -g1"
    [[ ${CXX:-} == *clang* ]] && debug_flags="-O0 -gline-tables-only"
    extra=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$debug_flags" -DGPUREAP_SANITIZE=ON -DGPUREAP_BUILD_TESTS=ON)
    # With clang the same build carries the libFuzzer targets (fuzz/, scripts/fuzz.sh).
    [[ ${CXX:-} == *clang* ]] && extra+=(-DGPUREAP_FUZZ=ON) ;;
  *) echo "build.sh: unknown variant '$variant' (use release or asan)" >&2; exit 2 ;;
esac
# Warnings are errors here (and so in CI): a plain cmake leaves them warnings.
cmake -S "$root" -B "$dir" -G Ninja -DGPUREAP_WERROR=ON "${extra[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)"
