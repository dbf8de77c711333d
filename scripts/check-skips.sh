#!/usr/bin/env bash
# Lists the tests that skipped in the last ctest run, with gtest's reason; fails when one skipped
# that tests/ci-allowed-skips.txt does not name. scripts/test.sh fails the run on that when CI
# runs as root, where a skip means a test that proved nothing; elsewhere (--list) it only lists
# them: ctest counts a suite with a skipped test as passed, so this is where a skip shows.
# Usage: scripts/check-skips.sh BUILD_DIR [--list]   (reads BUILD_DIR/Testing/Temporary/LastTest.log)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log=${1:?usage: $0 BUILD_DIR [--list]}/Testing/Temporary/LastTest.log
mode=${2:-check}
allowed=$root/tests/ci-allowed-skips.txt
[ -f "$log" ] || { echo "check-skips: no $log: run ctest first" >&2; exit 2; }

# gtest prints "[  SKIPPED ] Suite.Name (N ms)" for each skipped test, after the reason.
skipped=$(sed -n 's/^\[  SKIPPED \] \([^ ]*\) ([0-9]* ms)$/\1/p' "$log" | sort -u)
# The reason is the line after gtest's "<file>:<line>: Skipped" in that test's output.
reason_of() {
  awk -v t="$1" '$0 == "[ RUN      ] " t { inside = 1 } inside && /: Skipped$/ { getline; print; exit }' "$log"
}
if [ "$mode" = --list ]; then
  echo "check-skips: $(wc -w <<<"$skipped") tests skipped"
  for test in $skipped; do echo "  $test: $(reason_of "$test")"; done
  exit 0
fi
unexpected=()
for test in $skipped; do
  grep -q "^$test[[:space:]]" "$allowed" || unexpected+=("$test")
done
echo "check-skips: $(wc -w <<<"$skipped") skipped, ${#unexpected[@]} not in tests/ci-allowed-skips.txt"
if [ ${#unexpected[@]} -gt 0 ]; then
  for test in "${unexpected[@]}"; do
    reason=$(reason_of "$test")
    echo "check-skips: $test skipped: ${reason:-no reason given}" >&2
  done
  echo "check-skips: as root on CI every test must run: fix what made these skip, or name them with the reason in tests/ci-allowed-skips.txt" >&2
  exit 1
fi
