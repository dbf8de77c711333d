#!/usr/bin/env bash
# Writes gpureap(1) and gpureap-<command>(1), gzipped, from the help text the built binary
# prints, so that the pages cannot drift from `gpureap --help`: help2man turns each
# `--help` into a page; packaging/man/*.h2m add only what help cannot say (see also, files).
# Usage: gen-man.sh GPUREAP_BINARY OUTPUT_DIR INCLUDE_DIR [HELP2MAN]
set -euo pipefail
binary=$1 out=$2 includes=$3 help2man=${4:-help2man}
commands=(ps kill doctor run reap watch export fleet top)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# help2man runs PROGRAM --help; these wrappers make the usage line read `gpureap ...`, not the
# build path, and let it run a subcommand's help.
wrapper() {  # wrapper NAME [SUBCOMMAND]
  printf '#!/usr/bin/env bash\nexec -a gpureap %q %s "$@"\n' "$binary" "${2:-}" >"$work/$1"
  chmod +x "$work/$1"
}

version=$("$binary" --version)  # "gpureap X.Y.Z"
# The one-line summary of each page is the first line of its help, in lower case.
summary() { "$@" --help | sed -n -e '1{s/^gpureap: //' -e 's/^\(.\)/\L\1/' -e 'p}'; }

page() {  # page NAME SUMMARY [extra help2man options...]
  local name=$1 what=$2
  shift 2
  local include=()
  [ -f "$includes/$name.h2m" ] && include=(--include "$includes/$name.h2m")
  "$help2man" --no-info --section 1 --manual "User Commands" --source "$version" \
    --name "$what" "${include[@]}" "$@" --output "$work/$name.1" "$work/$name"
  gzip -9 -n -c "$work/$name.1" >"$out/$name.1.gz"
}

wrapper gpureap
page gpureap "$(summary "$binary")"
for command in "${commands[@]}"; do
  wrapper "gpureap-$command" "$command"
  # A subcommand has no --version of its own: give help2man the binary's (the number only,
  # or help2man would take "gpureap" for the page's name).
  page "gpureap-$command" "$(summary "$binary" "$command")" --version-string "${version##* }"
done
