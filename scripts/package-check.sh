#!/usr/bin/env bash
# Proves that the Debian package works: checks what it contains and declares, installs it
# (dpkg -i, then apt-get -f install for its dependencies), runs the INSTALLED /usr/bin/gpureap
# (--version, and `ps` on a simulated GPU held by a real process), then purges the package,
# leaving the machine as it was. Needs root.
# Usage: scripts/package-check.sh [PACKAGE.deb]   (default: what scripts/package.sh built)
# The simulator is built in the package's build directory, or taken from GPUREAP_SIM_BUILD_DIR
# (CI's sanitizer build: the simulator is never instrumented, so the installed binary can load
# its libnvidia-ml.so.1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${GPUREAP_PACKAGE_DIR:-$root/build-release}
say() { echo "package-check: $*"; }
die() {
  echo "package-check: FAIL: $*" >&2
  exit 1
}

deb=${1:-}
if [ -z "$deb" ]; then
  debs=("$dir"/gpureap_*.deb)
  deb=${debs[0]}
fi
[ -f "$deb" ] || { echo "package-check: no package at $deb: run scripts/package.sh first" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "package-check: needs root: it installs and removes the package with dpkg" >&2; exit 2; }
if [ "$(dpkg-query -W -f='${db:Status-Abbrev}' gpureap 2>/dev/null)" = "ii " ]; then
  echo "package-check: gpureap $(dpkg-query -W -f='${Version}' gpureap) is already installed; this check" \
    "installs and then removes the package, so remove it first (dpkg -r gpureap)" >&2
  exit 2
fi

# --- What the package declares and contains ------------------------------------------------
version=$(dpkg-deb -f "$deb" Version)
arch=$(dpkg --print-architecture)
[ "$(basename "$deb")" = "gpureap_${version}_${arch}.deb" ] ||
  die "$deb: expected the name gpureap_${version}_${arch}.deb"
for field in Package:gpureap Section:admin Architecture:"$arch"; do
  [ "$(dpkg-deb -f "$deb" "${field%%:*}")" = "${field#*:}" ] || die "$deb: ${field%%:*} is not ${field#*:}"
done
depends=$(dpkg-deb -f "$deb" Depends)
# The C++ runtime, fmt, toml++ and RE2 are linked in statically: only the C library is left.
# (libstdc++ and cpp-httplib come in through the HTTP module, which export, fleet and watch load.)
[[ $depends == *libc6* ]] ||
  die "$deb: Depends ($depends) does not name the C library: dpkg-shlibdeps did not run?"
[[ $depends != *libfmt* && $depends != *libtomlplusplus* && $depends != *libre2* && $depends != *yaml-cpp* ]] ||
  die "$deb: Depends ($depends) names a library gpureap links statically (CMakeLists.txt)"
unpacked=$(mktemp -d)
dpkg-deb -x "$deb" "$unpacked"
needed=$(objdump -p "$unpacked/usr/bin/gpureap" | awk '$1 == "NEEDED" { print $2 }')
rm -rf "$unpacked"
for library in $needed; do
  case $library in
    libc.so.* | libm.so.* | ld-linux*) ;;
    *) die "/usr/bin/gpureap needs $library: it links everything but the C library statically (CMakeLists.txt)" ;;
  esac
done
[[ $depends == *libcpp-httplib* ]] ||
  die "$deb: Depends ($depends) does not name cpp-httplib, which the HTTP module of export and fleet needs"
[ -n "$(dpkg-deb -f "$deb" Maintainer)" ] && [ -n "$(dpkg-deb -f "$deb" Description)" ] ||
  die "$deb: no Maintainer or Description"

contents=$(dpkg-deb --contents "$deb" | awk '{ print $6 }')
for path in /usr/bin/gpureap \
  /usr/share/man/man1/gpureap.1.gz /usr/share/man/man1/gpureap-ps.1.gz \
  /usr/share/man/man1/gpureap-kill.1.gz /usr/share/man/man1/gpureap-doctor.1.gz \
  /usr/share/man/man1/gpureap-reap.1.gz /usr/share/doc/gpureap/examples/slurm/epilog.sh \
  /usr/share/man/man1/gpureap-watch.1.gz /usr/share/doc/gpureap/examples/watch-policy.toml \
  /usr/share/man/man1/gpureap-top.1.gz \
  /usr/share/doc/gpureap/examples/systemd/gpureap-watch.service \
  /usr/share/man/man1/gpureap-export.1.gz "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/gpureap/gpureap-http.so" \
  /usr/share/man/man1/gpureap-fleet.1.gz /usr/share/doc/gpureap/examples/prometheus/gpureap-alerts.yml \
  /usr/share/bash-completion/completions/gpureap /usr/share/zsh/vendor-completions/_gpureap \
  /usr/share/doc/gpureap/examples/config.toml /usr/share/doc/gpureap/README.md; do
  grep -qxF ".$path" <<<"$contents" || die "$deb does not contain $path"
done
if grep -E 'gpusim|libnvidia-ml|libcuda|nvidia-smi' <<<"$contents"; then
  die "$deb contains the simulator (above): it is a test fixture, never installed"
fi
say "$(basename "$deb"): contents and control fields as expected (Depends: $depends)"

# --- A simulated GPU, built without sanitizers ---------------------------------------------
sim_dir=${GPUREAP_SIM_BUILD_DIR:-$dir}
cmake --build "$sim_dir" --target gpusim gpusim-cuda gpusim_nvml_r550 -j "$(nproc)" >/dev/null
nvml="$sim_dir/sim/drivers/r550/libnvidia-ml.so.1"
for program in "$nvml" "$sim_dir/sim/gpusim-cuda"; do
  # (grep reads it all: -q would end nm early, and pipefail would take its SIGPIPE for a miss)
  ! { nm "$program" && nm -D "$program"; } 2>/dev/null | grep '__asan_\|__ubsan_' >/dev/null ||
    die "$program is built with the sanitizers: the installed binary cannot load its simulator"
done

state=$(mktemp -d /tmp/gpureap-package-check-XXXXXX)
installed=0
holder=""
cleanup() {
  [ -n "$holder" ] && kill -KILL -- "-$holder" 2>/dev/null
  rm -rf "$state"
  if [ "$installed" = 1 ]; then
    dpkg --purge gpureap >/dev/null || echo "package-check: could not purge gpureap: run dpkg --purge gpureap" >&2
  fi
}
trap cleanup EXIT

gpu_name="NVIDIA H100 80GB HBM3 (package check)"
"$sim_dir/sim/gpusim" --state "$state" init --gpus 1 --memory 80GiB --name "$gpu_name" >/dev/null
# In its own process group, so that cleanup ends it and anything it forked.
setsid "$sim_dir/sim/gpusim-cuda" --state "$state" --alloc 0:3GiB >"$state/ready" 2>"$state/sim.log" </dev/null &
holder=$!
disown "$holder"  # ended on purpose by cleanup: no "Killed" notice
for _ in $(seq 1 200); do grep -q READY "$state/ready" && break; sleep 0.05; done
pid=$(sed -n 's/^READY pid=\([0-9]*\).*/\1/p' "$state/ready")
[ -n "$pid" ] || die "the simulated CUDA process did not start: $(cat "$state/sim.log")"

# --- Install ---------------------------------------------------------------------------------
installed=1
# Missing dependencies leave the package unconfigured; apt-get -f install then brings them.
dpkg -i "$deb" >/dev/null || say "dpkg -i left dependencies to resolve; apt-get -f install follows"
DEBIAN_FRONTEND=noninteractive apt-get -f install -y -qq -o DPkg::Lock::Timeout=120 >/dev/null
[ "$(dpkg-query -W -f='${db:Status-Abbrev}' gpureap)" = "ii " ] || die "gpureap is not installed after dpkg -i"
say "installed gpureap $version"

# --- Run the installed binary ----------------------------------------------------------------
bin=/usr/bin/gpureap
[ "$("$bin" --version)" = "gpureap $version" ] || die "$bin --version printed '$("$bin" --version)'"
# Every start pays for the program's shared libraries: the C library alone (docs/performance.md).
needed=$(LC_ALL=C readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
[[ $needed != *libstdc++* && $needed != *httplib* && $needed != *libssl* ]] ||
  die "$bin needs $needed: cpp-httplib and the C++ runtime belong in the HTTP module only"
# fleet loads the installed HTTP module: a closed port is status 20 (unreachable), not 1 (no module).
set +e
"$bin" fleet --prometheus http://127.0.0.1:1 --timeout 2 2>"$state/fleet.err"
status=$?
set -e
[ "$status" -eq 20 ] || die "installed gpureap fleet exited $status (20 expected): $(cat "$state/fleet.err")"
bash -c 'source /usr/share/bash-completion/completions/gpureap && complete -p gpureap' >/dev/null ||
  die "the installed bash completion does not load"
example=/usr/share/doc/gpureap/examples/config.toml
if [ -f "$example" ]; then  # (an image may exclude /usr/share/doc from what dpkg unpacks)
  # A dry run on PID 1, always refused: exit 8; a configuration the loader rejects: exit 2.
  set +e
  GPUREAP_CONFIG=$example "$bin" kill --dry-run 1 >/dev/null 2>"$state/config.err"
  status=$?
  set -e
  [ "$status" -eq 8 ] || die "the installed example configuration: kill --dry-run 1 exited $status: $(cat "$state/config.err")"
fi

run_ps() {
  GPUSIM_STATE_DIR=$state GPUREAP_DEV_DIR=$state/dev GPUREAP_NVML_LIBRARY=$nvml "$bin" ps --color never "$@"
}
table=$(run_ps) || die "installed gpureap ps exited $?: $table"
[[ $table == *"$gpu_name"* ]] || die "installed gpureap ps does not show the simulated GPU '$gpu_name':"$'\n'"$table"
grep -qE "^ *$pid .*3\.0 GiB" <<<"$table" ||
  die "installed gpureap ps does not show PID $pid holding 3.0 GiB:"$'\n'"$table"
json=$(run_ps --json) || die "installed gpureap ps --json exited $?"
[[ $json == *"\"pid\": $pid"* || $json == *"\"pid\":$pid"* ]] || die "installed gpureap ps --json does not list PID $pid"
say "installed $bin: --version, and ps shows the simulated GPU and its process (PID $pid):"
echo "$table"

# export loads its HTTP module from the installed path: serve, scrape once, stop with SIGTERM.
GPUSIM_STATE_DIR=$state GPUREAP_DEV_DIR=$state/dev GPUREAP_NVML_LIBRARY=$nvml \
  "$bin" export --listen 127.0.0.1:0 --no-kernel-log 2>"$state/export.err" &
exporter=$!
url=""
for _ in $(seq 1 200); do
  url=$(sed -n 's/.*serving \(http:[^ ]*\)$/\1/p' "$state/export.err")
  [ -n "$url" ] && break
  kill -0 "$exporter" 2>/dev/null || break
  sleep 0.05
done
[ -n "$url" ] || die "installed gpureap export did not start: $(cat "$state/export.err")"
metrics=$(curl -sf "$url") || die "GET $url failed"
grep -q "gpureap_gpu_memory_used_bytes{gpu=\"0\",.*} 3221225472" <<<"$metrics" ||
  die "installed gpureap export does not serve GPU 0's 3 GiB:"$'\n'"$metrics"
kill -TERM "$exporter"
wait "$exporter" || die "installed gpureap export exited $? on SIGTERM"
say "installed $bin export: loaded its HTTP module, served $url, stopped on SIGTERM"

# --- Remove ----------------------------------------------------------------------------------
dpkg --purge gpureap >/dev/null
installed=0
left=$(dpkg-query -W -f='${db:Status-Abbrev}' gpureap 2>/dev/null || true)
[ ! -e "$bin" ] && [[ $left == "" || $left == "un " || $left == "pn " ]] ||
  die "gpureap is still (partly) installed after dpkg --purge (status '$left')"
say "removed gpureap: the machine is as before"
