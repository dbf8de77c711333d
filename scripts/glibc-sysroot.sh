#!/usr/bin/env bash
# Makes (once) and prints the root whose C library the release program links against: Debian 11
# (bullseye, glibc 2.31) with its libc6-dev, from Debian's mirror with debootstrap, in
# /var/cache/gpureap-build/sysroot-bullseye. The program then needs no glibc newer than 2.28
# (scripts/glibc-floor.sh; src/glibc_compat.cpp supplies the rest). The same root is the
# Debian 11 system scripts/old-glibc-check.sh runs the tarball's binary in.
# Takes 1-4 minutes and ~200 MB once (network); afterwards it prints the cached path at once.
# Usage: scripts/glibc-sysroot.sh [--if-cached]   (--if-cached: print it only if it is there, make nothing)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sysroot=${GPUREAP_GLIBC_SYSROOT_CACHE:-/var/cache/gpureap-build/sysroot-bullseye}
mirror=http://deb.debian.org/debian
multiarch=x86_64-linux-gnu
ready=$sysroot/.gpureap-ready  # written last: a root an interrupted run left is made again

if [ -f "$ready" ]; then
  echo "$sysroot"
  exit 0
fi
[ "${1:-}" = --if-cached ] && exit 0
[ "$(id -u)" -eq 0 ] || { echo "glibc-sysroot: $sysroot is not made yet, and debootstrap needs root" >&2; exit 1; }
# One maker at a time (two release builds at once): the second waits, then finds it made.
mkdir -p "$(dirname "$sysroot")"
exec 9>"$sysroot.lock"
flock 9
if [ -f "$ready" ]; then
  echo "$sysroot"
  exit 0
fi
command -v debootstrap >/dev/null || "$root/scripts/install-quietly.sh" debootstrap
rm -rf "$sysroot"
echo "glibc-sysroot: making $sysroot (debootstrap bullseye from $mirror, 1-4 minutes)" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
debootstrap --variant=minbase --include=libc6-dev bullseye "$sysroot" "$mirror" >"$log" 2>&1 ||
  { cat "$log" >&2; echo "glibc-sysroot: debootstrap failed (its log above)" >&2; exit 1; }
# The linker reads the root's libraries through its links, which name absolute paths inside
# the root (/lib/x86_64-linux-gnu/ld-2.31.so): relative ones lead there from outside it too.
find "$sysroot/usr/lib64" "$sysroot/usr/lib/$multiarch" -maxdepth 1 -lname '/*' -print0 |
  while IFS= read -r -d '' link; do ln -sfnr "$sysroot$(readlink "$link")" "$link"; done
touch "$ready"
echo "$sysroot"
