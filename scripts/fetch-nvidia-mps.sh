#!/usr/bin/env bash
# Fetches NVIDIA's real MPS binaries, as Debian ships them (package nvidia-cuda-mps, component
# non-free), for the tests that start the real control daemon (tests/support/real_mps_daemon.hpp):
#   bookworm  535.x  ->  $GPUREAP_NVIDIA_MPS_DIR/535/usr/bin/nvidia-cuda-mps-control
#   trixie    550.x  ->  $GPUREAP_NVIDIA_MPS_DIR/550/usr/bin/nvidia-cuda-mps-control
# (default /var/cache/gpureap-test/nvidia-mps). `apt-get download` with a sources list, lists,
# cache and status of its own under that directory: the machine's apt sources and state are
# untouched and nothing is installed. `dpkg-deb -x` unpacks each into its directory.
# Idempotent: a version already unpacked is not fetched again. A failure (no network, no root)
# is reported and exits 0: the tests that need the binaries then say why they skip, and CI,
# which runs as root with a network, fails on such a skip (tests/ci-allowed-skips.txt).
set -uo pipefail

dir=${GPUREAP_NVIDIA_MPS_DIR:-/var/cache/gpureap-test/nvidia-mps}
releases=(bookworm:535 trixie:550)
# The machine's Debian mirror, else deb.debian.org.
mirror=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources \
           /etc/apt/sources.list.d/*.list 2>/dev/null | grep -oE 'https?://[^ ]+' | head -1)
mirror=${mirror:-http://deb.debian.org/debian}

say() { echo "fetch-nvidia-mps: $*" >&2; }

missing=()
for release in "${releases[@]}"; do
  [ -x "$dir/${release#*:}/usr/bin/nvidia-cuda-mps-control" ] || missing+=("$release")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  say "not root: not fetching ${missing[*]} into $dir (the real-MPS tests will skip)"
  exit 0
fi

fetch() {
  local apt="$dir/apt" release suite major deb version
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/preferences.d" "$apt/download" || return 1
  : > "$apt/status"
  : > "$apt/sources.list"
  for release in "${missing[@]}"; do
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror ${release%%:*} non-free" >> "$apt/sources.list"
  done
  local options=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "Dir::State::Status=$apt/status"
    -o Dir::Etc::Preferences=/dev/null -o "Dir::Etc::PreferencesParts=$apt/preferences.d"
    -o APT::Sandbox::User=root -o Acquire::Retries=2 -qq)
  apt-get "${options[@]}" update || return 1
  for release in "${missing[@]}"; do
    suite=${release%%:*}
    major=${release#*:}
    rm -f "$apt/download"/*.deb
    (cd "$apt/download" && apt-get "${options[@]}" download "nvidia-cuda-mps/$suite") || return 1
    deb=$(ls "$apt/download"/nvidia-cuda-mps_*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || return 1
    version=$(dpkg-deb -f "$deb" Version)
    if [ "${version%%.*}" != "$major" ]; then
      say "$suite now has nvidia-cuda-mps $version, not $major.x: tests/support/real_mps_daemon.hpp names the versions"
      return 1
    fi
    rm -rf "$dir/$major.new" && mkdir -p "$dir/$major.new" && dpkg-deb -x "$deb" "$dir/$major.new" || return 1
    echo "$version" > "$dir/$major.new/VERSION"
    rm -rf "$dir/$major" && mv "$dir/$major.new" "$dir/$major" || return 1
    say "nvidia-cuda-mps $version ($suite non-free) in $dir/$major"
  done
  rm -rf "$apt"
}

# Readable and runnable by the test user too (the tests start the daemon as an ordinary user).
if ! (umask 022 && fetch); then
  say "could not fetch ${missing[*]} from $mirror (non-free): the real-MPS tests will skip"
fi
exit 0
