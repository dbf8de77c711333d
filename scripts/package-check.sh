#!/usr/bin/env bash
# Proves that the three packages work (scripts/package.sh builds them):
#  - the .deb: checks what it contains and declares, installs it (dpkg -i, then apt-get -f
#    install for its dependencies), runs the INSTALLED /usr/bin/gpureap (--version, `ps` on a
#    simulated GPU held by a real process, export and fleet through its HTTP module), then
#    purges the package, leaving the machine as it was;
#  - the .rpm: its file list (rpm -qlp) is the .deb's with the RPM's paths, its Requires name
#    no library the program links statically; installed with rpm into an empty root (--root,
#    --nodeps --noscripts: this is Debian, whose rpm has no RHEL packages to satisfy them), its
#    binary runs there on the simulated GPU and loads its HTTP module from ../lib64/gpureap;
#  - the tarball: its files are the .deb's in the tarball's layout; unpacked into a temporary
#    directory, its binary runs on the simulated GPU and loads its module from ../lib/gpureap.
# The three carry the same program. Needs root.
# Usage: scripts/package-check.sh [PACKAGE.deb]   (default: what scripts/package.sh built; the
# .rpm and the tarball are taken from the .deb's directory)
# The simulator is built in the package's build directory, or taken from GPUREAP_SIM_BUILD_DIR
# (CI's sanitizer build: the simulator is never instrumented, so the installed binary can load
# its libnvidia-ml.so.1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${GPUREAP_PACKAGE_DIR:-$root/build-release}
# shellcheck source=scripts/check-messages.sh
source "$root/scripts/check-messages.sh"  # say, die, skip

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
# The C++ runtime, fmt, toml++ and RE2 are linked in statically: only the C library (and
# libgcc's unwinder) is left.
# (libstdc++ and cpp-httplib come in through the HTTP module, which export, fleet and watch load.)
[[ $depends == *libc6* ]] ||
  die "$deb: Depends ($depends) does not name the C library: dpkg-shlibdeps did not run?"
[[ $depends != *libfmt* && $depends != *libtomlplusplus* && $depends != *libre2* && $depends != *yaml-cpp* ]] ||
  die "$deb: Depends ($depends) names a library gpureap links statically (CMakeLists.txt)"
unpacked=$(mktemp -d)
dpkg-deb -x "$deb" "$unpacked"
needed=$(objdump -p "$unpacked/usr/bin/gpureap" | awk '$1 == "NEEDED" { print $2 }')
# The oldest C library the program runs on (the release build links against Debian 11's).
glibc_floor=$("$root/scripts/glibc-floor.sh" --project-floor)
floor_report=$("$root/scripts/glibc-floor.sh" --max "$glibc_floor" "$unpacked/usr/bin/gpureap" 2>&1) ||
  { rm -rf "$unpacked"; die "the packaged program needs a newer C library than glibc $glibc_floor:"$'\n'"$floor_report"; }
rm -rf "$unpacked"
for library in $needed; do
  case $library in
    # The C library (pthread and dl apart before glibc 2.34) and libgcc's unwinder, on every system.
    libc.so.* | libm.so.* | ld-linux* | libpthread.so.0 | libdl.so.2 | libgcc_s.so.1) ;;
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
say "$(basename "$deb"): contents and control fields as expected (Depends: $depends);" \
  "its program needs glibc $(sed -n 's/.* needs glibc \([0-9.]*\):.*/\1/p' <<<"$floor_report") (floor $glibc_floor)"
# The .deb's files (no directories), the list the other packages are compared with.
deb_files=$(dpkg-deb --contents "$deb" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' | sort)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
# same_files LABEL EXPECTED ACTUAL: the two lists of paths are the same, or the differences.
same_files() {
  local missing extra
  missing=$(comm -23 <(sort <<<"$2") <(sort <<<"$3"))
  extra=$(comm -13 <(sort <<<"$2") <(sort <<<"$3"))
  [ -z "$missing$extra" ] ||
    die "$1: not the .deb's files in its layout:${missing:+$'\n'missing: }${missing//$'\n'/ }${extra:+$'\n'extra: }${extra//$'\n'/ }"
}

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

# Runs PROGRAM (a packaged gpureap) where it lies: --version; ps shows the simulated GPU and
# its process; fleet loads the HTTP module (a closed port is status 20, unreachable; 1 would be
# no module). LABEL names the package in a failure.
sim_ps() {
  local program=$1
  shift
  GPUSIM_STATE_DIR=$state GPUREAP_DEV_DIR=$state/dev GPUREAP_NVML_LIBRARY=$nvml "$program" ps --color never "$@"
}
runs_here() {
  local label=$1 program=$2 table status
  [ "$("$program" --version)" = "gpureap $version" ] || die "$label: $program --version printed '$("$program" --version)'"
  table=$(sim_ps "$program") || die "$label: $program ps exited $?: $table"
  [[ $table == *"$gpu_name"* ]] || die "$label: $program ps does not show the simulated GPU '$gpu_name':"$'\n'"$table"
  grep -qE "^ *$pid .*3\.0 GiB" <<<"$table" ||
    die "$label: $program ps does not show PID $pid holding 3.0 GiB:"$'\n'"$table"
  set +e
  "$program" fleet --prometheus http://127.0.0.1:1 --timeout 2 2>"$state/fleet.err"
  status=$?
  set -e
  [ "$status" -eq 20 ] ||
    die "$label: $program fleet exited $status (20 expected: its HTTP module loaded): $(cat "$state/fleet.err")"
}
# Only the package's own module may answer: not one a plain `cmake --install` left here.
[ ! -e "/usr/lib/$multiarch/gpureap/gpureap-http.so" ] ||
  die "/usr/lib/$multiarch/gpureap/gpureap-http.so exists (a cmake --install?): remove it, or the RPM's and the tarball's binaries may load it instead of their own"

# --- The RPM ---------------------------------------------------------------------------------
command -v rpm >/dev/null || die "rpm is not installed (scripts/setup-deps.sh test installs it)"
rpm_package=$(dirname "$deb")/gpureap-$version-1.x86_64.rpm
[ -f "$rpm_package" ] || die "no $rpm_package beside $deb: scripts/package.sh builds both"
[ "$(rpm -qp --qf '%{NAME} %{VERSION} %{ARCH}' "$rpm_package")" = "gpureap $version x86_64" ] ||
  die "$rpm_package: name, version or architecture is not gpureap $version x86_64"
requires=$(rpm -qp --requires "$rpm_package")
if grep -E 'fmt|toml|re2|yaml|httplib|libssl|libcrypto|libstdc' <<<"$requires"; then
  die "$rpm_package requires the above: a library gpureap links statically, or one of the HTTP module's (not required: README, Install)"
fi
rpm_glibc=$(grep -o 'GLIBC_[0-9.]*' <<<"$requires" | sed 's/^GLIBC_//' | sort -V | tail -1)
[ -n "$rpm_glibc" ] || die "$rpm_package requires no versioned C library: rpmbuild did not scan the program?"
[ "$(printf '%s\n%s\n' "$rpm_glibc" "$glibc_floor" | sort -V | tail -1)" = "$glibc_floor" ] ||
  die "$rpm_package requires glibc $rpm_glibc, above the floor $glibc_floor (scripts/glibc-floor.sh)"
rpm_files=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$rpm_package" | awk '$1 !~ /^d/ { print $2 }')
same_files "$(basename "$rpm_package") (rpm -qlp)" \
  "$(sed -e "s|^/usr/lib/$multiarch/gpureap/|/usr/lib64/gpureap/|" \
    -e 's|^/usr/share/zsh/vendor-completions/|/usr/share/zsh/site-functions/|' <<<"$deb_files")" "$rpm_files"
# Into an empty root: --nodeps, as Debian's rpm knows none of the packages that would provide
# glibc; --noscripts, as the package has none and the root has no shell to run one.
rpm_root=$state/rpm-root
mkdir "$rpm_root"
# (Debian's rpm warns on every install that it is not Debian's package manager: shown on failure only.)
rpm --root "$rpm_root" --dbpath /var/lib/rpm -i --nodeps --noscripts "$rpm_package" 2>"$state/rpm.err" ||
  die "rpm --root $rpm_root -i $rpm_package failed: $(cat "$state/rpm.err")"
[ "$(rpm --root "$rpm_root" --dbpath /var/lib/rpm -q gpureap)" = "gpureap-$version-1.x86_64" ] ||
  die "rpm --root $rpm_root does not list gpureap $version as installed"
same_files "$(basename "$rpm_package") installed in $rpm_root" "$rpm_files" \
  "$(cd "$rpm_root" && find usr \( -type f -o -type l \) -printf '/%p\n')"
runs_here "the RPM installed in $rpm_root" "$rpm_root/usr/bin/gpureap"
say "$(basename "$rpm_package"): the .deb's files in the RPM's paths (Requires glibc $rpm_glibc);" \
  "installed into an empty root, its binary shows the simulated GPU and loads its HTTP module"

# --- The tarball -----------------------------------------------------------------------------
top=gpureap-$version-linux-x86_64
tarball=$(dirname "$deb")/$top.tar.gz
[ -f "$tarball" ] || die "no $tarball beside $deb: scripts/package.sh builds both"
same_files "$(basename "$tarball")" \
  "$(sed -e "s|^/usr/lib/$multiarch/gpureap/|/lib/gpureap/|" -e 's|^/usr/|/|' \
    -e 's|^/share/zsh/vendor-completions/|/share/zsh/site-functions/|' -e "s|^/|$top/|" <<<"$deb_files")" \
  "$(tar -tzf "$tarball" | grep -v '/$')"
mkdir "$state/unpacked"
tar -xzf "$tarball" -C "$state/unpacked"
runs_here "the tarball unpacked in $state/unpacked" "$state/unpacked/$top/bin/gpureap"
say "$(basename "$tarball"): the .deb's files in bin/, lib/gpureap/, share/; unpacked anywhere," \
  "its binary shows the simulated GPU and loads its HTTP module"

# --- Install ---------------------------------------------------------------------------------
installed=1
# Missing dependencies leave the package unconfigured; apt-get -f install then brings them.
dpkg -i "$deb" >/dev/null || say "dpkg -i left dependencies to resolve; apt-get -f install follows"
DEBIAN_FRONTEND=noninteractive apt-get -f install -y -qq -o DPkg::Lock::Timeout=120 >/dev/null
[ "$(dpkg-query -W -f='${db:Status-Abbrev}' gpureap)" = "ii " ] || die "gpureap is not installed after dpkg -i"
say "installed gpureap $version"

# --- Run the installed binary ----------------------------------------------------------------
bin=/usr/bin/gpureap
runs_here "the installed .deb" "$bin"
for other in "$rpm_root/usr/bin/gpureap" "$state/unpacked/$top/bin/gpureap"; do
  cmp -s "$bin" "$other" || die "$other is not the .deb's $bin: the packages must carry the same program"
done
# Every start pays for the program's shared libraries: the C library alone (docs/performance.md).
needed=$(LC_ALL=C readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
[[ $needed != *libstdc++* && $needed != *httplib* && $needed != *libssl* ]] ||
  die "$bin needs $needed: cpp-httplib and the C++ runtime belong in the HTTP module only"
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

table=$(sim_ps "$bin")
json=$(sim_ps "$bin" --json) || die "installed gpureap ps --json exited $?"
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
