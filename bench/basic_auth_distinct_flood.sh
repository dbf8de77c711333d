#!/usr/bin/env bash
# Benchmark (issue 30): `gpureap export --web-config` while 200 concurrent clients each send a
# new wrong password with every request (none repeats: no remembered failure helps), at each
# bcrypt COST given (default 10 and 12). The flood comes from 127.0.0.1; beside it:
#   - a scraper that authenticated before the flood: 20 scrapes;
#   - first-time scrapers with the right password (users new1..new5, each never seen before)
#     from another address, 127.0.0.2, one after the other;
#   - first-time scrapers from the flood's own address (new6..new8): they cannot be told from
#     the flood, and may be answered 429.
# Prints per cost: the answers the flood got, the exporter's CPU (cores, /proc/<pid>/stat over
# the measurement) and each client's status and latency (curl's time_total, connection included). Goals: remembered < 50 ms, first-time
# from another address < 2 s, exporter CPU <= 1 core.
# Usage: bench/basic_auth_distinct_flood.sh [COST...]
#        GPUREAP_BUILD=<build dir> picks the build (default ./build, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUREAP_BUILD:-$root/build}
costs=("$@")
[ ${#costs[@]} -gt 0 ] || costs=(10 12)
for cost in "${costs[@]}"; do
  [[ "$cost" =~ ^[0-9]+$ ]] && [ "$cost" -ge 4 ] && [ "$cost" -le 16 ] || { echo "bench: COST must be 4 to 16 (got '$cost')" >&2; exit 2; }
done
[ -x "$build/src/gpureap" ] && [ -f "$build/src/gpureap-http.so" ] || "$root/scripts/build.sh" release >/dev/null
# shellcheck source=bench/web_exporter.sh
source "$root/bench/web_exporter.sh"
exporter=""
state=""
trap '[ -n "$exporter" ] && kill "$exporter" 2>/dev/null; [ -n "$state" ] && rm -rf "$state"' EXIT
echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(basename "$build") build"
for cost in "${costs[@]}"; do
  state=$(mktemp -d)
  BCRYPT_COST=$cost WEB_EXTRA_USERS="new1:pw1 new2:pw2 new3:pw3 new4:pw4 new5:pw5 new6:pw6 new7:pw7 new8:pw8" \
    start_web_exporter http
  # The flood in a process of its own (200 threads), so that its interpreter's scheduling is
  # not in the figures; each measured request is one curl.
  python3 - "$url" "$state/flood" <<'PY' &
import base64, collections, http.client, sys, threading, time, urllib.parse
url, out = sys.argv[1], sys.argv[2]
u = urllib.parse.urlparse(url)
answers, lock, stop = collections.Counter(), threading.Lock(), threading.Event()
def flood(i):
    n, c = 0, None
    while not stop.is_set():
        try:
            c = c or http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            token = base64.b64encode(f"prometheus:wrong-{i}-{n}".encode()).decode()
            c.request("GET", "/metrics", headers={"Authorization": "Basic " + token})
            r = c.getresponse(); r.read()
            with lock: answers[r.status] += 1
        except Exception:
            c = None
            with lock: answers["error"] += 1
        n += 1
threads = [threading.Thread(target=flood, args=(i,), daemon=True) for i in range(200)]
for t in threads: t.start()
while not stop.is_set():
    try:
        open(out + ".stop").close(); stop.set()
    except FileNotFoundError:
        time.sleep(0.2)
for t in threads: t.join(timeout=70)
open(out, "w").write(str(dict(answers)))
PY
  flood=$!
  cpu() { awk '{ print $14 + $15 }' "/proc/$exporter/stat"; }
  scrape() {  # USER PASSWORD [SOURCE]: "STATUS SECONDS"
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 60 ${3:+--interface "$3"} -u "$1:$2" "$url"
  }
  first=$(scrape prometheus good-password)  # pays bcrypt once
  sleep 2  # every flood client has sent its first requests
  c0=$(cpu); t0=$(date +%s.%N)
  remembered=()
  for _ in $(seq 20); do remembered+=("$(scrape prometheus good-password)"); sleep 0.1; done
  other=()
  for i in 1 2 3 4 5; do other+=("new$i $(scrape "new$i" "pw$i" 127.0.0.2)"); sleep 0.3; done
  same=()
  for i in 6 7 8; do same+=("new$i $(scrape "new$i" "pw$i")"); sleep 0.3; done
  c1=$(cpu); t1=$(date +%s.%N)
  touch "$state/flood.stop"
  wait "$flood" || true
  printf '%s\n' "${remembered[@]}" >"$state/remembered"
  echo
  echo "cost $cost: first authentication before the flood: ${first#* } s"
  echo "  flood: 200 clients of one process, answers $(cat "$state/flood")"
  echo "  exporter CPU during the measurements: $(echo "($c1 - $c0) / $(getconf CLK_TCK) / ($t1 - $t0)" | bc -l | cut -c1-4) cores over $(echo "$t1 - $t0" | bc -l | cut -c1-4) s"
  echo "  remembered scraper, 20 scrapes (curl, a new connection each): statuses $(cut -d' ' -f1 "$state/remembered" | sort -u | tr '\n' ' ')median $(cut -d' ' -f2 "$state/remembered" | sort -n | awk '{ a[NR] = $1 } END { printf "%.1f ms, max %.1f ms", (a[int((NR + 1) / 2)] + a[int(NR / 2) + 1]) / 2 * 1000, a[NR] * 1000 }')"
  echo "  first-time scrapers from 127.0.0.2 (status, seconds): ${other[*]}"
  echo "  first-time scrapers from the flood's address: ${same[*]}"
  kill "$exporter" 2>/dev/null || true
  wait "$exporter" 2>/dev/null || true
  exporter=""
  rm -rf "$state"
  state=""
done
