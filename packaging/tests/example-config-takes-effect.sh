#!/usr/bin/env bash
# The example configuration shipped in the package must load with gpureap's own loader and
# every key in it must do what its comment says: the loader ignores keys it does not know,
# so a misspelt key would otherwise pass unnoticed.
#   - its only table is [kill] and its only keys are protect and audit_log (those that
#     src/kill/kill_config.cpp reads);
#   - with it, `gpureap kill` refuses a process named like its first protected name, which
#     it signals with an empty configuration;
#   - its audit_log (pointed at a temporary file, the rest unchanged) receives the lines of a
#     real kill, and a bystander process beside the target survives.
# Usage: example-config-takes-effect.sh GPUREAP_BINARY EXAMPLE_CONFIG
set -uo pipefail
binary=$1 example=$2
# shellcheck source=packaging/tests/check-lib.sh
source "$(dirname "$0")/check-lib.sh"

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

tables=$(grep -E '^\s*\[' "$example" | tr -d ' ' | sort -u | tr '\n' ' ')
keys=$(grep -oE '^\s*[A-Za-z0-9_.-]+\s*=' "$example" | tr -d ' =' | sort | tr '\n' ' ')
[ "$tables" = "[kill] " ] || fail "$example: tables are [$tables], expected only [kill]"
[ "$keys" = "audit_log protect " ] || fail "$example: keys are [$keys], expected audit_log and protect"

# A process whose name (comm and executable basename) is the example's first protected name.
protected=$(sed -nE 's/^protect *= *\["([^"*]+)".*/\1/p' "$example")
[ -n "$protected" ] || fail "$example: no plain first name in protect = [...]"
start() {  # start NAME: a sleeping process called NAME, not our child (we would not reap it)
  cp "$(command -v sleep)" "$work/$1"
  ("$work/$1" 300 </dev/null >/dev/null 2>&1 & echo $! >"$work/$1.pid")
  PID=$(cat "$work/$1.pid")
  pids+=("$PID")
}
start "${protected:-none}"
protected_pid=$PID

: >"$work/empty.toml"
GPUREAP_CONFIG="$work/empty.toml" "$binary" kill --dry-run --json "$protected_pid" >"$work/empty.json"
status=$?
[ "$status" -eq 0 ] || fail "with an empty configuration, kill --dry-run $protected_pid exited $status, expected 0"
GPUREAP_CONFIG="$example" "$binary" kill --dry-run --json "$protected_pid" >"$work/example.json" 2>"$work/example.err"
status=$?
[ "$status" -eq 8 ] || fail "with $example, kill --dry-run of '$protected' exited $status, expected 8 (refused): $(cat "$work/example.err")"
grep -q '"kind": "protected"' "$work/example.json" ||
  fail "with $example, '$protected' (PID $protected_pid) was not refused as protected"

# audit_log: the example with only the path changed, and a real kill of a process of ours.
audit="$work/audit.log"
sed -E "s|^audit_log *=.*|audit_log = \"$audit\"|" "$example" >"$work/audit.toml"
start gpureap-config-target
target=$PID
start gpureap-config-bystander
bystander=$PID
unset GPUREAP_AUDIT_LOG
GPUREAP_CONFIG="$work/audit.toml" "$binary" kill --yes --no-verify --timeout 5 "$target" >"$work/kill.out" 2>&1
status=$?
[ "$status" -eq 0 ] || fail "kill $target with the example's audit_log exited $status: $(cat "$work/kill.out")"
grep -q "\"pid\":$target\b\|\"pid\": $target\b" "$audit" 2>/dev/null ||
  fail "the example's audit_log ($audit) did not receive the kill of PID $target"
kill -0 "$bystander" 2>/dev/null || fail "bystander PID $bystander did not survive the kill of PID $target"

finish "problem(s) with the example configuration $example" \
  "the example configuration $example loads, and protect and audit_log take effect"
