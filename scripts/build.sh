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
    # -O1: the sanitizers' recommended level; line tables only, enough for their stack traces.
    debug_flags="-O1 -g1"
    [[ ${CXX:-} == *clang* ]] && debug_flags="-O1 -gline-tables-only"
    extra=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$debug_flags" -DGPUREAP_SANITIZE=ON -DGPUREAP_BUILD_TESTS=ON)
    # With clang the same build carries the libFuzzer targets (fuzz/, scripts/fuzz.sh).
    [[ ${CXX:-} == *clang* ]] && extra+=(-DGPUREAP_FUZZ=ON) ;;
  *) echo "build.sh: unknown variant '$variant' (use release or asan)" >&2; exit 2 ;;
esac
cmake -S "$root" -B "$dir" -G Ninja "${extra[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)"
