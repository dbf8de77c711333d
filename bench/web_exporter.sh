# Sourced by the benchmarks of an exporter behind a web-config (basic_auth_flood.sh,
# tls_idle_flood.sh). Needs $build and $state set by the caller.
#   start_web_exporter SCHEME [web-config lines...]
# writes $state/web.yml (the lines given, then the user prometheus with password
# "good-password" at bcrypt cost $BCRYPT_COST (default 10), and for each NAME:PASSWORD in
# $WEB_EXTRA_USERS another user at that cost), starts `gpureap export` on a free loopback port with no
# driver and a long cache (the collection stays out of the scrape's time), and sets $exporter
# (its PID) and $url (SCHEME://127.0.0.1:PORT) once it serves.
# shellcheck source=bench/sim_host.sh
source "$(dirname "${BASH_SOURCE[0]}")/sim_host.sh"  # sim_host_serving_url

start_web_exporter() {
  local scheme=$1
  shift
  local cost=${BCRYPT_COST:-10}
  bcrypt_of() {
    python3 -c "import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=2**$cost)))" "$1" 2>/dev/null
  }
  {
    printf '%s\n' "$@"
    printf 'basic_auth_users:\n  prometheus: %s\n' "$(bcrypt_of good-password)"
    local entry
    for entry in ${WEB_EXTRA_USERS:-}; do printf '  %s: %s\n' "${entry%%:*}" "$(bcrypt_of "${entry#*:}")"; done
  } >"$state/web.yml"
  GPUREAP_NVML_LIBRARY=/nonexistent "$build/src/gpureap" export --listen 127.0.0.1:0 --cache 60s --no-kernel-log \
    --web-config "$state/web.yml" </dev/null >/dev/null 2>"$state/err" &
  exporter=$!
  sim_host_serving_url "$state/err" "$scheme"
}
