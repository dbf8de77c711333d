#!/usr/bin/env bash
# Benchmark: `gpureap export` with TLS and basic auth beside 100 TLS connections that send
# nothing and 10 that trickle a ClientHello a byte every 50 ms. Prints a good scrape's latency
# (median and max of 20, each on a fresh connection: a handshake each) without and then with
# those connections, and how many scrapes failed (10 s timeout each); the machine is shared,
# so the figure to read is the difference against the reference measured in the same run.
# Usage: bench/tls_idle_flood.sh
#        GPUREAP_BUILD=<build dir> picks the build (default ./build, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUREAP_BUILD:-$root/build}
[ -x "$build/src/gpureap" ] && [ -f "$build/src/gpureap-http.so" ] || "$root/scripts/build.sh" release >/dev/null
state=$(mktemp -d)
trap 'kill "$exporter" 2>/dev/null || true; rm -rf "$state"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$state/tls.key" -out "$state/tls.crt" 2>/dev/null
# shellcheck source=bench/web_exporter.sh
source "$root/bench/web_exporter.sh"
start_web_exporter https "tls_server_config:" "  cert_file: tls.crt" "  key_file: tls.key"
python3 - "$url" "$state/tls.crt" <<'PY'
import base64, http.client, os, socket, ssl, statistics, sys, threading, time, urllib.parse
url, ca = sys.argv[1], sys.argv[2]
u = urllib.parse.urlparse(url)
context = ssl.create_default_context(cafile=ca)
auth = {"Authorization": "Basic " + base64.b64encode(b"prometheus:good-password").decode()}
def scrapes(n=20):
    times, failed = [], 0
    for _ in range(n):
        t = time.monotonic()
        try:
            c = http.client.HTTPSConnection(u.hostname, u.port, timeout=10, context=context)
            c.request("GET", "/metrics", headers=auth); r = c.getresponse(); r.read(); c.close()
            assert r.status == 200, r.status
        except (OSError, http.client.HTTPException) as e:
            failed += 1
            if failed == 1: print(f"a scrape failed: {e!r}")
        times.append(time.monotonic() - t)
        time.sleep(0.05)
    return times, failed
scrapes(3)  # warm: the first bcrypt of the good password, the first collection
ref, ref_failed = scrapes()
if ref_failed: sys.exit(f"{ref_failed} of 20 scrapes failed with nothing beside them")
silent = [socket.create_connection((u.hostname, u.port)) for _ in range(100)]
trickling = [socket.create_connection((u.hostname, u.port)) for _ in range(10)]
for s in trickling: s.send(bytes([0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00, 0xc4, 0x03, 0x03]))
stop = False
def trickle():
    while not stop:
        for s in trickling:
            try: s.send(b"\x2a")
            except OSError: pass
        time.sleep(0.05)
thread = threading.Thread(target=trickle); thread.start()
during, failed = scrapes()
stop = True; thread.join()
med = lambda x: statistics.median(x) * 1000
print(f"host: {os.cpu_count()} cores, load average {open('/proc/loadavg').read().split()[0]}")
print(f"good scrape, fresh TLS connection, alone (reference): median {med(ref):.2f} ms, max {max(ref)*1000:.2f} ms")
print(f"beside 100 silent + 10 trickling TLS connections:    median {med(during):.2f} ms, max {max(during)*1000:.2f} ms, {failed} of 20 failed")
PY
