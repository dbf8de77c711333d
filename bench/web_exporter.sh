# Sourced by the benchmarks of an exporter behind a web-config (basic_auth_flood.sh,
# tls_idle_flood.sh). Needs $build and $state set by the caller.
#   start_web_exporter SCHEME [web-config lines...]
# writes $state/web.yml (the lines given, then the user prometheus with password
# "good-password" at bcrypt cost 10), starts `gpureap export` on a free loopback port with no
# driver and a long cache (the collection stays out of the scrape's time), and sets $exporter
# (its PID) and $url (SCHEME://127.0.0.1:PORT) once it serves.
start_web_exporter() {
  local scheme=$1
  shift
  local hash
  hash=$(python3 -c "import crypt; print(crypt.crypt('good-password', crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1024)))" 2>/dev/null)
  { printf '%s\n' "$@"; printf 'basic_auth_users:\n  prometheus: %s\n' "$hash"; } >"$state/web.yml"
  GPUREAP_NVML_LIBRARY=/nonexistent "$build/src/gpureap" export --listen 127.0.0.1:0 --cache 60s --no-kernel-log \
    --web-config "$state/web.yml" </dev/null >/dev/null 2>"$state/err" &
  exporter=$!
  url=""
  for _ in $(seq 1 200); do
    url=$(sed -n "s/.*serving \\($scheme:[^ ]*\\)\$/\\1/p" "$state/err")
    [ -n "$url" ] && return
    sleep 0.05
  done
  cat "$state/err" >&2
  exit 1
}
