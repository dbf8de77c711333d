#!/usr/bin/env bash
# scripts/install-quietly.sh (what setup-deps.sh installs with) on a package that does what
# Debian's prometheus, munge and slurm-wlm do: its postinst enables a service at boot and starts
# it, a daemon listening on TCP. scripts/service-check.sh must see the service when the package
# is installed plainly, and nothing after install-quietly.sh, which must put back the
# policy-rc.d that was there before (none, or the administrator's), after a Ctrl-C too.
# Runs in its own network and mount namespaces, with a copy of /usr/sbin as a host without a
# container image's policy-rc.d has it: the host's own is never touched.
# Usage: install-quietly-check.sh SOURCE_DIR. Root only; exits 77 (skipped) without it.
set -euo pipefail
source_dir=$1
skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "installs a package: needs root"
for tool in unshare ip dpkg-deb apt-get start-stop-daemon /usr/bin/prometheus; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done
if [ -z "${GPUREAP_IN_TEST_NAMESPACES:-}" ]; then
  exec env GPUREAP_IN_TEST_NAMESPACES=1 unshare --mount --net --propagation private bash "$0" "$@"
fi
ip link set lo up

name=gpureap-test-quiet-service
port=19617
work=$(mktemp -d /tmp/gpureap-quiet-XXXXXX)
cleanup() {
  rm -f /run/$name.hold /run/$name.held
  dpkg --purge --force-all "$name" >/dev/null 2>&1 || true
  [ -f /run/$name.pid ] && kill "$(cat /run/$name.pid)" 2>/dev/null || true
  rm -f /run/$name.pid
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# /usr/sbin as on a Debian host: no policy-rc.d, so invoke-rc.d starts what it is asked to.
mkdir "$work/sbin"
cp -a /usr/sbin/. "$work/sbin/"
rm -f "$work/sbin/policy-rc.d"
# A booted host's runlevel (a container has none, and invoke-rc.d then starts nothing).
rm -f "$work/sbin/runlevel"
printf '#!/bin/sh\necho N 2\n' >"$work/sbin/runlevel"
chmod 0755 "$work/sbin/runlevel"
mount --bind "$work/sbin" /usr/sbin

# The package: an init script and a systemd unit that run Prometheus on 127.0.0.1:$port, and
# a postinst that enables and starts it as dh_installinit/dh_installsystemd's do. With
# /run/$name.hold present, the postinst waits there (the moment a Ctrl-C lands in).
pkg=$work/pkg
mkdir -p "$pkg/DEBIAN" "$pkg/etc/init.d" "$pkg/lib/systemd/system" "$pkg/usr/share/$name"
printf 'scrape_configs: []\n' >"$pkg/usr/share/$name/prometheus.yml"
daemon_args="--config.file=/usr/share/$name/prometheus.yml --web.listen-address=127.0.0.1:$port --storage.tsdb.path=$work/tsdb"
cat >"$pkg/etc/init.d/$name" <<EOF
#!/bin/sh
### BEGIN INIT INFO
# Provides:          $name
# Required-Start:    \$remote_fs
# Required-Stop:     \$remote_fs
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: gpureap's test of a package that starts a service
### END INIT INFO
case "\$1" in
  start) start-stop-daemon --start --background --make-pidfile --pidfile /run/$name.pid \\
           --exec /usr/bin/prometheus -- $daemon_args ;;
  stop) start-stop-daemon --stop --remove-pidfile --pidfile /run/$name.pid --retry 5 || true ;;
esac
EOF
chmod 0755 "$pkg/etc/init.d/$name"
printf '[Service]\nExecStart=/usr/bin/prometheus %s\n[Install]\nWantedBy=multi-user.target\n' \
  "$daemon_args" >"$pkg/lib/systemd/system/$name.service"
printf 'Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: gpureap tests <root@localhost>\nDescription: test package that starts a service\n' \
  "$name" >"$pkg/DEBIAN/control"
cat >"$pkg/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
if [ -e /run/$name.hold ]; then
  touch /run/$name.held
  while [ -e /run/$name.hold ]; do sleep 0.1; done
fi
deb-systemd-helper enable $name.service
update-rc.d $name defaults
invoke-rc.d $name start
EOF
cat >"$pkg/DEBIAN/prerm" <<EOF
#!/bin/sh
invoke-rc.d $name stop || true
EOF
cat >"$pkg/DEBIAN/postrm" <<EOF
#!/bin/sh
if [ "\$1" = purge ]; then
  update-rc.d $name remove >/dev/null || true
  deb-systemd-helper purge $name.service >/dev/null || true
fi
EOF
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/prerm" "$pkg/DEBIAN/postrm"
deb=$work/$name.deb
dpkg-deb --root-owner-group --build "$pkg" "$deb" >/dev/null

listening() { grep -q "^ *[0-9]*: 0100007F:$(printf '%04X' "$port") 00000000:0000 0A" /proc/net/tcp; }
wait_until() {  # wait_until SECONDS COMMAND...: whether it became true in time
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do [ "$SECONDS" -lt "$deadline" ] || return 1; sleep 0.1; done
}
not_listening() { ! listening; }
purge() {
  dpkg --purge --force-all "$name" >/dev/null 2>&1 || fail "could not purge $name"
  wait_until 20 not_listening ||
    fail "the test service still listens after its package was purged"
}

snapshot=$work/before
"$source_dir/scripts/service-check.sh" snapshot "$snapshot"

echo "== control: installed plainly, the package enables and starts its service"
dpkg -i "$deb" >/dev/null
[ -e /run/$name.pid ] || fail "the plainly installed package's service was not started"
wait_until 30 listening || fail "the plainly installed package's service never listened on 127.0.0.1:$port"
if report=$("$source_dir/scripts/service-check.sh" compare "$snapshot" 2>&1); then
  fail "service-check found nothing after a plain install: $report"
fi
echo "$report"
grep -q "listening tcp 127.0.0.1:$port  held by prometheus (pid [0-9]*)" <<<"$report" ||
  fail "service-check did not name the listener"
grep -q "enabled /etc/systemd/system/multi-user.target.wants/$name.service" <<<"$report" ||
  fail "service-check did not name the enabled unit"
purge

echo "== install-quietly.sh: nothing enabled, nothing started, no policy-rc.d left"
output=$("$source_dir/scripts/install-quietly.sh" "$deb" 2>&1) || fail "install-quietly.sh failed: $output"
echo "$output"
dpkg-query -W -f='${Status}' "$name" | grep -q "install ok installed" || fail "the package was not installed"
grep -q "disabled what the packages enabled: .*$name" <<<"$output" || fail "install-quietly.sh did not say what it disabled"
[ ! -e /usr/sbin/policy-rc.d ] || fail "install-quietly.sh left a policy-rc.d where there was none"
# (start-stop-daemon writes the pid file before it returns: none means never started.)
[ ! -e /run/$name.pid ] || fail "the service was started during install-quietly.sh"
"$source_dir/scripts/service-check.sh" compare "$snapshot"
purge

echo "== Ctrl-C during the install: the administrator's policy-rc.d comes back unchanged"
printf '#!/bin/sh\n# the administrator'"'"'s own\nexit 0\n' >/usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d
cp -p /usr/sbin/policy-rc.d "$work/admin-policy"
touch /run/$name.hold
rm -f /run/$name.held
# (As from a terminal: its own process group, SIGINT not ignored as a background job's is.)
setsid env --default-signal=INT "$source_dir/scripts/install-quietly.sh" "$deb" >"$work/interrupted.log" 2>&1 &
installer=$!
wait_until 60 test -e /run/$name.held || fail "the postinst never started: $(cat "$work/interrupted.log")"
grep -q '^exit 101$' /usr/sbin/policy-rc.d || fail "no refusing policy-rc.d during the install"
kill -INT -- "-$installer"  # a terminal's Ctrl-C: the whole foreground process group
# apt lets dpkg finish (it runs in a session of its own): the postinst enables and starts.
rm -f /run/$name.hold
status=0
wait "$installer" || status=$?
cat "$work/interrupted.log"
[ "$status" -eq 130 ] || fail "install-quietly.sh ended with status $status after a Ctrl-C, not 130"
cmp -s /usr/sbin/policy-rc.d "$work/admin-policy" || fail "the administrator's policy-rc.d was not put back"
[ ! -e /usr/sbin/policy-rc.d.gpureap-saved ] || fail "the saved copy was left behind"
[ ! -e /run/$name.pid ] || fail "the interrupted install started the service"
"$source_dir/scripts/service-check.sh" compare "$snapshot"
echo "interrupted (status $status): policy-rc.d restored, nothing enabled or started"
