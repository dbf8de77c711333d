# shellcheck shell=bash
# Sourced by the package checks (package-check.sh, old-glibc-check.sh): their lines, each led by
# the script's name.
#   say TEXT    on stdout
#   die TEXT    "FAIL: TEXT" on stderr; exit status 1
#   skip TEXT   "skipped: TEXT" on stdout; exit status 77 (ctest's and test.sh's "skipped")
check_name=$(basename "$0" .sh)
say() { echo "$check_name: $*"; }
die() {
  echo "$check_name: FAIL: $*" >&2
  exit 1
}
skip() {
  echo "$check_name: skipped: $*"
  exit 77
}
