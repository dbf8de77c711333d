#!/usr/bin/env bash
# Prints the oldest C library a program runs on: the highest GLIBC_ symbol version it needs
# from the dynamic linker (objdump -T), and the symbols that need that version. With
# --max X.Y it fails (status 1) when the program needs more, naming each symbol above X.Y.
# Usage: scripts/glibc-floor.sh [--max X.Y] PROGRAM
#        scripts/glibc-floor.sh --project-floor   prints the floor the packaged program meets
#   RHEL 8 has glibc 2.28, Debian 11 2.31, Ubuntu 20.04 2.31, RHEL 9 2.34, Ubuntu 22.04 2.35.
set -euo pipefail
# The packaged program's floor (package-check.sh holds the packages to it): RHEL 8's glibc.
project_floor=2.28
if [ "${1:-}" = --project-floor ]; then
  echo "$project_floor"
  exit 0
fi
max=""
if [ "${1:-}" = --max ]; then
  max=${2:?--max needs a version, e.g. 2.28}
  [[ $max =~ ^[0-9]+(\.[0-9]+)+$ ]] || { echo "glibc-floor: --max $max is not a version like 2.28" >&2; exit 2; }
  shift 2
fi
program=${1:?usage: glibc-floor.sh [--max X.Y] PROGRAM}
[ -f "$program" ] || { echo "glibc-floor: no file $program" >&2; exit 2; }
table=$(LC_ALL=C objdump -T "$program" 2>&1) || { echo "glibc-floor: objdump -T $program: $table" >&2; exit 2; }

# "<version> <symbol>" for every symbol taken from the C library at a GLIBC_ version.
needs=$(sed -n 's/.*[ (]GLIBC_\([0-9][0-9.]*\))\{0,1\} \{1,\}\([^ ]*\)$/\1 \2/p' <<<"$table" | sort -u)
[ -n "$needs" ] || { echo "glibc-floor: $program takes no versioned symbol from the C library" >&2; exit 2; }
versions=$(cut -d' ' -f1 <<<"$needs" | sort -uV)
floor=$(tail -1 <<<"$versions")
echo "$program needs glibc $floor:" $(awk -v v="$floor" '$1 "" == v { print $2 }' <<<"$needs")
echo "versions it needs: $(tr '\n' ' ' <<<"$versions")"
[ -n "$max" ] || exit 0
above=$(awk '{ print $1 }' <<<"$versions" | while read -r v; do
  [ "$(printf '%s\n%s\n' "$v" "$max" | sort -V | tail -1)" = "$max" ] || echo "$v"
done)
if [ -n "$above" ]; then
  echo "glibc-floor: FAIL: $program needs glibc $floor, above the floor $max, for:" >&2
  for v in $above; do echo "  GLIBC_$v: $(awk -v v="$v" '$1 "" == v { print $2 }' <<<"$needs" | tr '\n' ' ')" >&2; done
  exit 1
fi
echo "within the floor $max"
