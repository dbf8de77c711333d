#!/usr/bin/env bash
# The completions are written by hand (to complete values: users, PIDs, signals, files); this
# keeps them in step with the binary. For the top level and each subcommand, what
# `gpureap ... --help` lists must be exactly what the bash completion offers and what the
# zsh completion names, options that take a value must be completed as such, and a choice
# list in the help (`{auto,always,never}`) must be what bash offers after the option.
# Usage: completions-match-help.sh GPUREAP_BINARY BASH_COMPLETION ZSH_COMPLETION
set -uo pipefail
binary=$1 bash_file=$2 zsh_file=$3
# shellcheck source=packaging/tests/check-lib.sh
source "$(dirname "$0")/check-lib.sh"

# Lines of one section ("Options:", "Subcommands:") of a help text, up to the blank line.
section() { awk -v head="$1" '$0 == head { on = 1; next } on && /^$/ { exit } on' ; }

# "NAME VALUE|FLAG CHOICES" per option of `gpureap ARGS --help`; -h,--help gives two lines.
# CLI11 puts one space between an option and its value type, a column gap before the text.
options_of() {
  "$binary" "$@" --help | section "Options:" | awk '
    /^  -/ {
      kind = ($0 ~ /^  [^ ]+ [^ ]/) ? "VALUE" : "FLAG"
      choices = ""
      if (match($0, /\{[^}]*\}/)) choices = substr($0, RSTART + 1, RLENGTH - 2)
      n = split($1, names, ",")
      for (i = 1; i <= n; i++) print names[i], kind, choices
    }'
}

# What the bash completion offers for the words given (the last one is being completed), in
# OFFERED. Plain bash from here on: the test forks little, so that it stays fast on a busy host.
# shellcheck disable=SC1090
source "$bash_file"
offered() {
  COMP_WORDS=(gpureap "$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _gpureap
  OFFERED="${COMPREPLY[*]}"
}
same() {  # same WHAT EXPECTED ACTUAL: equal as sets of words
  local -A expected=() actual=()
  local word
  for word in $2; do expected[$word]=1; done
  for word in $3; do actual[$word]=1; done
  local ok=1
  for word in "${!expected[@]}"; do [ -n "${actual[$word]:-}" ] || ok=0; done
  for word in "${!actual[@]}"; do [ -n "${expected[$word]:-}" ] || ok=0; done
  [ "$ok" = 1 ] || fail "$1: --help lists [$(sorted "$2")], the completion offers [$(sorted "$3")]"
}
sorted() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

# Body of one zsh function (`NAME() {` to the closing `}` at the start of a line).
zsh_function() { awk -v name="$1() {" '$0 == name { on = 1; next } on && /^}/ { exit } on' "$zsh_file"; }
# Options named in the specs (the lines that start with a quote): after ' { ( , ) * or a space.
zsh_options() {
  grep -E "^[[:space:]]*'" | grep -oE -- "[{'(,)* ]--?[a-zA-Z][a-zA-Z-]*" | cut -c2- | sort -u | tr '\n' ' ' | sed 's/ $//'
}

zsh_text=$(<"$zsh_file")

# Top level: its options and subcommands.
top_options=$(options_of | awk '{ print $1 }' | tr '\n' ' ')
subcommands=$("$binary" --help | section "Subcommands:" | awk '/^  [a-z]/ { print $1 }' | tr '\n' ' ')
[ -n "$subcommands" ] || fail "no subcommands found in gpureap --help"
offered -
same "bash: gpureap -" "$top_options" "$OFFERED"
offered ''
same "bash: gpureap " "$subcommands" "$OFFERED"
zsh_top=$(zsh_function _gpureap)
same "zsh: _gpureap options" "$top_options" "$(zsh_options <<<"$zsh_top")"
same "zsh: _gpureap commands" "$subcommands" \
  "$(grep -oE "^ *'[a-z]+:" <<<"$zsh_top" | tr -d " ':" | tr '\n' ' ')"

for command in $subcommands; do
  table=$(options_of "$command")
  names=$(awk '{ print $1 }' <<<"$table" | tr '\n' ' ')
  offered "$command" -
  all_options=$OFFERED
  same "bash: gpureap $command -" "$names" "$all_options"
  body=$(zsh_function "_gpureap_$command")
  [ -n "$body" ] || fail "zsh: no function _gpureap_$command"
  same "zsh: _gpureap_$command options" "$names" "$(zsh_options <<<"$body")"

  while read -r name kind choices; do
    offered "$command" "$name" ''
    after=$OFFERED
    # An option spec in zsh: 'NAME[...', '*NAME[...', '(...)NAME[...' or {NAME,...}; with a
    # value: NAME= or NAME+.
    spec=""
    re="[{',)*]$name[=+]?[][,}]"
    [[ $body =~ $re ]] && spec=${BASH_REMATCH[0]}
    if [ "$kind" = VALUE ]; then
      [[ " $after " == *" -"* ]] && fail "bash: gpureap $command $name takes a value, but options are offered after it"
      [[ $spec =~ [=+].$ ]] || fail "zsh: _gpureap_$command: $name takes a value: write it as $name= (long) or $name+ (short)"
      if [ -n "$choices" ]; then
        same "bash: gpureap $command $name (choices)" "${choices//,/ }" "$after"
        for choice in ${choices//,/ }; do
          [[ $zsh_text == *" $choice"* ]] || fail "zsh: $name's choice $choice is missing"
        done
      fi
    else
      offered "$command" "$name" -
      [ "$OFFERED" = "$all_options" ] ||
        fail "bash: gpureap $command $name is a flag, but the completion treats it as taking a value"
      [[ -z $spec || $spec =~ [=+].$ ]] && fail "zsh: _gpureap_$command: $name is a flag: no = or + after it"
    fi
  done <<<"$table"
done

bash -n "$bash_file" || fail "bash -n $bash_file"
if command -v zsh >/dev/null; then
  zsh -n "$zsh_file" || fail "zsh -n $zsh_file"
else
  echo "note: zsh is not installed, so $zsh_file was checked as text only (not parsed by zsh)"
fi

finish "mismatch(es) between gpureap --help and the completions" \
  "completions match gpureap --help: top level and $subcommands"
