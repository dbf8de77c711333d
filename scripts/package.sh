#!/usr/bin/env bash
# Builds the packages of a release gpureap (without the tests or the simulator), its man pages,
# completions, example configuration and documents (cmake/packaging.cmake), in build-release/:
#   gpureap_<version>_<arch>.deb              Debian, Ubuntu
#   gpureap-<version>-1.x86_64.rpm            RHEL, Rocky, Alma (rpmbuild: Debian's rpm package)
#   gpureap-<version>-linux-x86_64.tar.gz     any Linux: bin/, lib/gpureap/, share/, run in place
# Prints the three packages' paths, one a line, on the last three lines.
# Usage: scripts/package.sh   (GPUREAP_PACKAGE_DIR: another build directory)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${GPUREAP_PACKAGE_DIR:-$root/build-release}

"$root/scripts/setup-deps.sh" build
command -v rpmbuild >/dev/null || "$root/scripts/install-quietly.sh" rpm  # (packaging alone needs it)
# The program links against Debian 11's C library: it then runs on glibc 2.28 and later
# (scripts/glibc-sysroot.sh makes the root once: 1-4 minutes, network).
sysroot=$("$root/scripts/glibc-sysroot.sh")
# SKIP_INSTALL_ALL_DEPENDENCY: packaging builds only what it ships, not the simulator.
# Built as Debian builds a package (scripts/packager-flags.sh: dpkg-buildflags' hardening) with
# the Release build's -O3 and warnings as errors: this build is also the proof that a
# packager's build with gcc compiles clean (scripts/compile-check.sh checks another compiler).
packager_flags=$("$root/scripts/packager-flags.sh")
mapfile -t packager <<<"$packager_flags"
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${packager[@]}" -DGPUREAP_WERROR=ON \
  -DGPUREAP_BUILD_TESTS=OFF -DGPUREAP_GLIBC_SYSROOT="$sysroot" \
  -DCMAKE_INSTALL_PREFIX=/usr -DGPUREAP_MAN_PAGES=ON -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
cmake --build "$dir" --target gpureap gpureap_man -j "$(nproc)"
rm -f "$dir"/gpureap_*.deb "$dir"/gpureap-*.rpm "$dir"/gpureap-*.tar.gz
# One cpack run per package: the install script reads the layout from the environment.
for generator in DEB:deb RPM:rpm TGZ:tarball; do
  GPUREAP_PACKAGE_LAYOUT=${generator#*:} cpack --config "$dir/CPackConfig.cmake" -B "$dir" -G "${generator%%:*}" \
    >"$dir/cpack-${generator#*:}.log" 2>&1 ||
    { cat "$dir/cpack-${generator#*:}.log" >&2; echo "package.sh: cpack -G ${generator%%:*} failed (log above)" >&2; exit 1; }
done
shopt -s nullglob
packages=("$dir"/gpureap_*.deb "$dir"/gpureap-*.rpm "$dir"/gpureap-*-linux-*.tar.gz)
[ ${#packages[@]} -eq 3 ] || { echo "package.sh: expected 3 packages in $dir, found: ${packages[*]}" >&2; exit 1; }
printf '%s\n' "${packages[@]}"
