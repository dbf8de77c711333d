#!/usr/bin/env bash
# Compiles gpureap as a packager builds it: CMAKE_BUILD_TYPE=Release (-O3) with Debian's
# dpkg-buildflags (hardening=+all, scripts/packager-flags.sh), warnings as errors, so that the
# optimiser's warnings, which the -O0 sanitizer build never sees, fail here rather than in a
# packager's build. It compiles every object of src/ and links nothing. CI does not run it:
# package.sh builds the shipped program with gcc and these flags; this is for the other
# compiler (CC=clang CXX=clang++, by hand: docs/performance.md has the last run).
# Usage: scripts/compile-check.sh [BUILD_DIR]   (CC/CXX: the compiler, gcc unless set)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build-compile-check}
export CC=${CC:-gcc} CXX=${CXX:-g++}
echo "compile-check: Release with dpkg-buildflags, $("$CXX" --version | head -1), in $dir"

packager_flags=$("$root/scripts/packager-flags.sh")
mapfile -t packager <<<"$packager_flags"
# With gcc and Debian 11's root at hand, the release program's glibc stand-ins (src/glibc_compat.cpp) too.
sysroot=""
[[ $("$CXX" --version) == *clang* ]] || sysroot=$("$root/scripts/glibc-sysroot.sh" --if-cached)
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${packager[@]}" \
  -DGPUREAP_GLIBC_SYSROOT="$sysroot" \
  -DGPUREAP_WERROR=ON -DGPUREAP_BUILD_TESTS=OFF -DGPUREAP_MAN_PAGES=OFF >/dev/null
mapfile -t objects < <(ninja -C "$dir" -t targets all | grep -o '^src/CMakeFiles/[^:]*\.o')
[ "${#objects[@]}" -gt 0 ] || { echo "compile-check: no objects of src/ found in $dir" >&2; exit 1; }
ninja -C "$dir" -j "$(nproc)" "${objects[@]}"
echo "compile-check: ${#objects[@]} objects compiled without a warning"
