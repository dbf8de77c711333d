#!/usr/bin/env bash
# deploy/prometheus against Prometheus's own tools and against the metric contract:
#   config   promtool check config prometheus.yml (with the rule files it names)
#   rules    promtool check rules on the alert and recording rules
#   test     promtool test rules: every alert firing and not firing, every recording rule
#   names    every gpureap_* series the rules and the dashboard use is in docs/metrics.md, and
#            every recorded series the dashboard uses is recorded; the dashboard is valid JSON
# Exits 77 (skipped) when promtool is not installed (Debian: prometheus, scripts/setup-deps.sh).
# Usage: prometheus-checks.sh config|rules|test|names SOURCE_DIR
set -euo pipefail
what=$1 source=$(cd "$2" && pwd)
deploy=$source/deploy/prometheus
cd "$deploy"

case $what in
  config | rules | test)
    if ! command -v promtool >/dev/null; then
      echo "skipped: promtool is not installed (Debian package prometheus; scripts/setup-deps.sh)"
      exit 77
    fi
    ;;
esac

case $what in
  config)
    # The example's file_sd directory does not exist here: promtool only warns about it.
    promtool check config prometheus.yml
    ;;
  rules)
    promtool check rules gpureap-alerts.yml gpureap-recording.yml
    ;;
  test)
    promtool test rules tests/*.test.yml
    ;;
  names)
    jq -e '.panels | length > 0' grafana-dashboard.json >/dev/null || { echo "grafana-dashboard.json: no panels"; exit 1; }
    documented=$(grep -oE '`gpureap_[a-z_]+`' "$source/docs/metrics.md" | tr -d '`' | sort -u)
    recorded=$(grep -oE 'record: [a-z_:]+' gpureap-recording.yml | cut -d' ' -f2 | sort -u)
    failed=0
    used=$( (grep -hoE 'gpureap_[a-z_]+' gpureap-alerts.yml gpureap-recording.yml;
             jq -r '.. | .expr? // empty' grafana-dashboard.json | grep -oE 'gpureap_[a-z_]+') |
           grep -vE ':' | sort -u)
    for name in $used; do
      # Names inside recorded series (instance:gpureap_..._bytes:sum) are not series of their own.
      if ! grep -qx "$name" <<<"$documented" && ! grep -q ":$name:" <<<"$recorded"; then
        echo "$name is used in deploy/prometheus but is not in docs/metrics.md"
        failed=1
      fi
    done
    for name in $(jq -r '.. | .expr? // empty' grafana-dashboard.json | grep -oE '[a-z_]+:gpureap_[a-z_]+:[a-z_]+' | sort -u); do
      grep -qx "$name" <<<"$recorded" || { echo "the dashboard uses $name, which no recording rule makes"; failed=1; }
    done
    [ "$failed" = 0 ] && echo "deploy/prometheus uses $(wc -w <<<"$used") documented series and $(wc -w <<<"$recorded") recorded ones"
    exit $failed
    ;;
  *)
    echo "usage: $0 config|rules|test|names SOURCE_DIR" >&2
    exit 2
    ;;
esac
