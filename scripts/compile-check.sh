#!/usr/bin/env bash
# Compiles gpureap as a packager builds it: CMAKE_BUILD_TYPE=Release (-O3) with Debian's
# dpkg-buildflags (hardening=+all), warnings as errors, so that the optimiser's warnings, which
# the -O0 sanitizer build never sees, fail CI rather than a packager's build. It compiles every
# object of src/ and links nothing: the release build links the program.
# Usage: scripts/compile-check.sh [BUILD_DIR]   (CC/CXX: the compiler, gcc unless set)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build-compile-check}
export CC=${CC:-gcc} CXX=${CXX:-g++}
echo "compile-check: Release with dpkg-buildflags, $("$CXX" --version | head -1), in $dir"

# What Debian's debhelper passes a package's build, less -g: debug information changes no warning
# and doubles the time the check takes.
flags() { DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get "$1" | sed -E 's/(^| )-g( |$)/ /g'; }
cxxflags="$(flags CPPFLAGS) $(flags CXXFLAGS)"
# With gcc and Debian 11's root at hand, the release program's glibc stand-ins (src/glibc_compat.cpp) too.
sysroot=""
[[ $("$CXX" --version) == *clang* ]] || sysroot=$("$root/scripts/glibc-sysroot.sh" --if-cached)
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$cxxflags" \
  -DGPUREAP_GLIBC_SYSROOT="$sysroot" \
  -DCMAKE_EXE_LINKER_FLAGS="$(flags LDFLAGS)" -DCMAKE_MODULE_LINKER_FLAGS="$(flags LDFLAGS)" \
  -DGPUREAP_WERROR=ON -DGPUREAP_BUILD_TESTS=OFF -DGPUREAP_MAN_PAGES=OFF >/dev/null
mapfile -t objects < <(ninja -C "$dir" -t targets all | grep -o '^src/CMakeFiles/[^:]*\.o')
[ "${#objects[@]}" -gt 0 ] || { echo "compile-check: no objects of src/ found in $dir" >&2; exit 1; }
ninja -C "$dir" -j "$(nproc)" "${objects[@]}"
echo "compile-check: ${#objects[@]} objects compiled without a warning"
