#!/usr/bin/env bash
# Installs the Debian 12 packages gpureap needs to build, test and benchmark.
# Idempotent: does nothing when everything is already installed.
set -euo pipefail
trap 'bash "$(dirname "$0")/fetch-nvidia-mps.sh" || true' EXIT  # NVIDIA's real MPS binaries for the tests, also when nothing is missing here

packages=(
  build-essential cmake ninja-build pkg-config
  lld   # the faster linker (CMakeLists.txt)
  clang libclang-rt-dev   # clang compiles the tests and fuzzers (libFuzzer runtime)
  libcli11-dev libfmt-dev nlohmann-json3-dev libtomlplusplus-dev libre2-dev
  libgtest-dev libgmock-dev googletest
  psmisc lsof procps util-linux passwd hyperfine
  help2man groff-base dpkg-dev zsh
  jq   # deploy/slurm/prolog.sh reads gpureap ps --json with it (its test runs it)
  libcpp-httplib-dev libssl-dev libcrypt-dev libyaml-cpp-dev  # export: HTTP(S), bcrypt, web-config
  libncurses-dev   # top: the full-screen view
  tmux   # top: its end-to-end tests drive the real binary in a terminal
  prometheus   # promtool checks the metrics and rules; the fleet test runs a real server
  slurm-wlm munge   # tests/slurm: a two-node Slurm cluster runs the shipped deploy/slurm scripts
  runc   # the container tests run real OCI containers (podman and crun refuse a hybrid cgroup host)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup-deps: need root to install: ${missing[*]}" >&2; exit 1
  fi
fi
echo "setup-deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
