#!/usr/bin/env bash
# Builds the Debian package build-release/gpureap_<version>_<arch>.deb: a release gpureap
# without the tests or the simulator, its man pages, completions, example configuration and
# documents (cmake/packaging.cmake). Prints the package's path on the last line.
# Usage: scripts/package.sh   (GPUREAP_PACKAGE_DIR: another build directory)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${GPUREAP_PACKAGE_DIR:-$root/build-release}

"$root/scripts/setup-deps.sh" build
# SKIP_INSTALL_ALL_DEPENDENCY: packaging builds only what it ships, not the simulator.
# -O2, as Debian builds packages (gcc 12 at -O3 warns falsely, -Wrestrict, and warnings are errors).
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DGPUREAP_BUILD_TESTS=OFF \
  -DCMAKE_INSTALL_PREFIX=/usr -DGPUREAP_MAN_PAGES=ON -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
cmake --build "$dir" --target gpureap gpureap_man -j "$(nproc)"
rm -f "$dir"/gpureap_*.deb
cpack --config "$dir/CPackConfig.cmake" -B "$dir" -G DEB >"$dir/cpack.log" 2>&1 ||
  { cat "$dir/cpack.log" >&2; echo "package.sh: cpack failed (log above)" >&2; exit 1; }
debs=("$dir"/gpureap_*.deb)
[ -f "${debs[0]}" ] || { cat "$dir/cpack.log" >&2; echo "package.sh: cpack wrote no gpureap_*.deb in $dir" >&2; exit 1; }
echo "${debs[0]}"
