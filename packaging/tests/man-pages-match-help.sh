#!/usr/bin/env bash
# The man pages are generated from `gpureap --help` (packaging/man/gen-man.sh); this checks
# that what a reader of `man gpureap-kill` sees still carries every option and every
# paragraph of that help, and the pages' names and cross references.
# Usage: man-pages-match-help.sh GPUREAP_BINARY MAN_DIR   (MAN_DIR holds gpureap*.1.gz)
set -uo pipefail
binary=$1 mandir=$2
# shellcheck source=packaging/tests/check-lib.sh
source "$(dirname "$0")/check-lib.sh"
command -v groff >/dev/null || { echo "SKIP: groff (groff-base) is not installed: cannot render the pages"; exit 77; }

# The page as a terminal shows it, without bold/underline, on one long line per paragraph.
render() { zcat "$1" | groff -man -Tascii -rLL=400n -rHY=0 -P-cbou 2>/dev/null; }
squeeze() { tr -s ' \n' ' '; }

check() {  # check PAGE_NAME HELP_ARGS...
  local name=$1
  shift
  local page="$mandir/$name.1.gz"
  [ -f "$page" ] || { fail "$page is missing (build the target gpureap_man)"; return; }
  local text help
  text=$(render "$page")
  help=$("$binary" "$@" --help)
  local re=$'\nNAME\n +'"$name - [a-z]"
  [[ $text =~ $re ]] || fail "$name: no NAME line '$name - ...'"
  [[ $text == *$'\nSEE ALSO\n'* ]] || fail "$name: no SEE ALSO section"
  # Every option the help lists.
  local option
  for option in $(awk '/^Options:$/ { on = 1; next } on && /^$/ { exit } on && /^  -/ { print $1 }' <<<"$help" | tr ',' ' '); do
    [[ $text == *"$option"* ]] || fail "$name: option $option of gpureap $* --help is not in the page"
  done
  # Every paragraph of text after the options (exit statuses, environment, ...), as words.
  local flat paragraph
  flat=$(squeeze <<<"$text")
  while IFS= read -r paragraph; do
    [ -n "$paragraph" ] || continue
    [[ $flat == *"$paragraph"* ]] || fail "$name: this help text is not in the page: ${paragraph:0:80}..."
  done < <(awk '/^Options:$/ { on = 1 } on && /^$/ { after = 1 } after' <<<"$help" |
    awk 'BEGIN { RS = ""; ORS = "\n" } { gsub(/\n/, " "); print }' | sed 's/  */ /g')
}

check gpureap
top=$(render "$mandir/gpureap.1.gz")
for command in $("$binary" --help | awk '/^Subcommands:$/ { on = 1; next } on && /^$/ { exit } on { print $1 }'); do
  check "gpureap-$command" "$command"
  [[ $top == *"gpureap-$command(1)"* ]] || fail "gpureap(1) does not refer to gpureap-$command(1)"
done

finish "difference(s) between gpureap --help and the man pages in $mandir" \
  "man pages in $mandir match gpureap --help"
