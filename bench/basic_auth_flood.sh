#!/usr/bin/env bash
# Benchmark: `gpureap export` with basic auth (bcrypt cost 10) while 14 clients repeat one
# wrong password on kept-alive connections, for SECONDS (default 5). Prints the exporter's CPU
# (cores, from /proc/<pid>/stat over the flood) and a good scrape's latency (median and max of
# 20, one after the other) without and then with the flood, and their ratio: the machine is
# shared, so the figure to read is the ratio against the reference measured in the same run.
# Usage: bench/basic_auth_flood.sh [SECONDS]
#        GPUREAP_BUILD=<build dir> picks the build (default ./build, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-5}
build=${GPUREAP_BUILD:-$root/build}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "bench: SECONDS must be a positive number (got '$seconds')" >&2; exit 2; }
[ -x "$build/src/gpureap" ] && [ -f "$build/src/gpureap-http.so" ] || "$root/scripts/build.sh" release >/dev/null
state=$(mktemp -d)
trap 'kill "$exporter" 2>/dev/null || true; rm -rf "$state"' EXIT
# shellcheck source=bench/web_exporter.sh
source "$root/bench/web_exporter.sh"
start_web_exporter http
python3 - "$url" "$exporter" "$seconds" <<'PY'
import base64, http.client, os, statistics, sys, threading, time, urllib.parse
url, pid, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
u = urllib.parse.urlparse(url)
def auth(p): return {"Authorization": "Basic " + base64.b64encode(f"prometheus:{p}".encode()).decode()}
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def scrapes(n=20):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    times = []
    for _ in range(n):
        t = time.monotonic(); c.request("GET", "/metrics", headers=auth("good-password"))
        r = c.getresponse(); r.read(); times.append(time.monotonic() - t)
        assert r.status == 200, r.status
        time.sleep(0.05)
    return times
scrapes(3)  # warm: the first bcrypt of the good password, the first collection
ref = scrapes()
stop = False; refused = [0]
def flood():
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    while not stop:
        try:
            c.request("GET", "/metrics", headers=auth("wrong")); r = c.getresponse(); r.read()
            refused[0] += r.status == 401
        except Exception:
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
threads = [threading.Thread(target=flood) for _ in range(14)]
for t in threads: t.start()
time.sleep(0.5)
c0, t0 = cpu(), time.monotonic()
during = scrapes()
time.sleep(max(0, seconds - (time.monotonic() - t0)))
cores = (cpu() - c0) / (time.monotonic() - t0)
stop = True
for t in threads: t.join()
med = lambda x: statistics.median(x) * 1000
print(f"host: {os.cpu_count()} cores, load average {open('/proc/loadavg').read().split()[0]}; flood {seconds:.0f} s, 14 clients, {refused[0]} answered 401")
print(f"exporter CPU during the flood: {cores:.2f} cores")
print(f"good scrape, no flood (reference): median {med(ref):.2f} ms, max {max(ref)*1000:.2f} ms")
print(f"good scrape, during the flood:     median {med(during):.2f} ms, max {max(during)*1000:.2f} ms ({med(during)/med(ref):.1f}x the reference)")
PY
