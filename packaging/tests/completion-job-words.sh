#!/usr/bin/env bash
# The bash completion of `gpureap run`: gpureap's options are offered before the job's command,
# never after its first word (`gpureap run python3 --re<TAB>` must not offer --report: it would
# go to the job). Usage: completion-job-words.sh gpureap.bash
set -euo pipefail
source "$1"
failures=0

# What <TAB> offers at the end of the words given (the last one is being completed), as bash
# splits them (COMP_WORDBREAKS splits --report=file into --report, =, file).
offers() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _gpureap
  printf '%s\n' "${COMPREPLY[@]}"
}
expect() {  # expect "what" "offered words (one line)" WORDS...
  local what=$1 want=$2
  shift 2
  local got
  got=$(offers "$@" | sort | paste -sd ' ')
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: '$*<TAB>' offered '$got', expected '$want'"
    failures=$((failures + 1))
  fi
}
expect_command() {  # the job's first word: commands are offered
  local got
  got=$(offers "$@" | grep -cx bash || true)
  [ "$got" -ge 1 ] || { echo "FAIL: '$*<TAB>' did not offer commands (bash)"; failures=$((failures + 1)); }
}

expect "gpureap's option before the job" "--report" gpureap run --rep
expect "after the job's first word" "" gpureap run python3 --rep
expect "after a value-taking option and the job's first word" "" gpureap run --report out.json python3 --rep
expect "after --option=value and the job's first word" "" gpureap run --report = out.json python3 --rep
expect "after a flag and the job's first word" "" gpureap run --fail-fast python3 -
expect "after --" "" gpureap run -- python3 --rep
expect "a job's word after --" "" gpureap run -- --rep
expect "gpureap's option after a flag" "--report" gpureap run --fail-fast --rep
expect_command gpureap run bas
expect_command gpureap run --report out.json bas
expect_command gpureap run --report = out.json bas
expect_command gpureap run -- bas
expect "kill still offers its options" "--signal" gpureap kill --sig

[ "$failures" -eq 0 ] || exit 1
echo "bash completion: gpureap run stops at the job's command"
