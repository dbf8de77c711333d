#!/usr/bin/env bash
# Prints, one a line, the CMake arguments that give a build the flags Debian's debhelper passes a
# package's build (dpkg-buildflags with hardening=+all: _FORTIFY_SOURCE, the stack protector,
# format checks; -z relro and -z now), less -g: debug information changes no warning and no
# code, and doubles the compile. CMAKE_BUILD_TYPE's own flags come after these (Release: -O3).
# package.sh builds the shipped program with them; compile-check.sh compiles with them.
# Usage: flags=$(scripts/packager-flags.sh); mapfile -t args <<<"$flags"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# (From the source root: its -ffile-prefix-map names the checkout as ".".)
flags() { (cd "$root" && DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get "$1") | sed -E 's/(^| )-g( |$)/ /g'; }
cppflags=$(flags CPPFLAGS)
cxxflags=$(flags CXXFLAGS)
ldflags=$(flags LDFLAGS)
echo "-DCMAKE_CXX_FLAGS=$cppflags $cxxflags"
for kind in EXE SHARED MODULE; do echo "-DCMAKE_${kind}_LINKER_FLAGS=$ldflags"; done
