# Sourced by the packaging checks: collect every failure, then report them all at once.
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
finish() {  # finish WHAT-FAILED WHAT-PASSED
  if [ "$failures" -ne 0 ]; then
    echo "$failures $1" >&2
    exit 1
  fi
  echo "$2"
}
