#!/usr/bin/env bash
# Fails when a test skipped that tests/ci-allowed-skips.txt does not name: run by
# scripts/test.sh when CI runs as root, where a skip means a test that proved nothing.
# Usage: scripts/check-skips.sh BUILD_DIR   (reads BUILD_DIR/Testing/Temporary/LastTest.log)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log=${1:?usage: $0 BUILD_DIR}/Testing/Temporary/LastTest.log
allowed=$root/tests/ci-allowed-skips.txt
[ -f "$log" ] || { echo "check-skips: no $log: run ctest first" >&2; exit 2; }

# gtest prints "[  SKIPPED ] Suite.Name (N ms)" for each skipped test, after the reason.
skipped=$(sed -n 's/^\[  SKIPPED \] \([^ ]*\) ([0-9]* ms)$/\1/p' "$log" | sort -u)
unexpected=()
for test in $skipped; do
  grep -q "^$test[[:space:]]" "$allowed" || unexpected+=("$test")
done
echo "check-skips: $(wc -w <<<"$skipped") skipped, ${#unexpected[@]} not in tests/ci-allowed-skips.txt"
if [ ${#unexpected[@]} -gt 0 ]; then
  for test in "${unexpected[@]}"; do
    # The reason is the line after gtest's "<file>:<line>: Skipped" in that test's output.
    reason=$(awk -v t="$test" '$0 ~ "^\"" t "\" start time" { inside = 1 } inside && /: Skipped$/ { getline; print; exit }' "$log")
    echo "check-skips: $test skipped: ${reason:-no reason given}" >&2
  done
  echo "check-skips: as root on CI every test must run: fix what made these skip, or name them with the reason in tests/ci-allowed-skips.txt" >&2
  exit 1
fi
