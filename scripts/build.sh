#!/usr/bin/env bash
# Configures and builds one variant. Usage: scripts/build.sh [release|asan]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
variant=${1:-release}
case "$variant" in
  release) dir="$root/build"; extra=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir="$root/build-asan"; extra=(-DCMAKE_BUILD_TYPE=Debug -DGPUREAP_SANITIZE=ON) ;;
  *) echo "build.sh: unknown variant '$variant' (use release or asan)" >&2; exit 2 ;;
esac
"$root/scripts/setup-deps.sh"
cmake -S "$root" -B "$dir" -G Ninja "${extra[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)"
