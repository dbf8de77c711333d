#!/usr/bin/env bash
# Configures and builds one variant. Usage: scripts/build.sh [release|asan]
#   release  build/       optimised program and simulator, no tests (what users run)
#   asan     build-asan/  everything with the tests, under AddressSanitizer + UndefinedBehaviorSanitizer
# Uses clang when it is installed (it compiles this code about twice as fast as gcc); CC/CXX
# choose another compiler.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
variant=${1:-release}
"$root/scripts/setup-deps.sh"
if [ -z "${CXX:-}" ] && command -v clang++ >/dev/null; then
  export CC=clang CXX=clang++
fi
case "$variant" in
  release)
    dir="$root/build"
    extra=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DGPUREAP_BUILD_TESTS=OFF) ;;
  asan)
    dir="$root/build-asan"
    # -O0: the sanitizers find the same errors (nothing optimised away) and the build takes 105 s
    # instead of 183 s on 2 cores (366 → 218 s of compile CPU), for 3-5 s more test time.
    # Line tables only: enough for their stack traces.
    debug_flags="-O0 -g1"
    [[ ${CXX:-} == *clang* ]] && debug_flags="-O0 -gline-tables-only"
    extra=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$debug_flags" -DGPUREAP_SANITIZE=ON -DGPUREAP_BUILD_TESTS=ON)
    # With clang the same build carries the libFuzzer targets (fuzz/, scripts/fuzz.sh).
    [[ ${CXX:-} == *clang* ]] && extra+=(-DGPUREAP_FUZZ=ON) ;;
  *) echo "build.sh: unknown variant '$variant' (use release or asan)" >&2; exit 2 ;;
esac
cmake -S "$root" -B "$dir" -G Ninja "${extra[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)"
