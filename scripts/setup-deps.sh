#!/usr/bin/env bash
# Installs the Debian 12 packages gpureap needs. Usage: scripts/setup-deps.sh [build|test]
#   build  what building, packaging and running gpureap needs (the quick start, scripts/package.sh)
#   test   that and what the tests, fuzzers and benchmarks need (the default; scripts/test.sh)
# No package's service is started or enabled (scripts/install-quietly.sh): the tests start their
# own Prometheus, munged and slurmd. Idempotent: does nothing when everything is installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

build_packages=(
  build-essential cmake ninja-build pkg-config
  lld   # the faster linker (CMakeLists.txt)
  libcli11-dev libfmt-dev nlohmann-json3-dev libtomlplusplus-dev libre2-dev
  libcpp-httplib-dev libssl-dev libcrypt-dev libyaml-cpp-dev  # export: HTTP(S), bcrypt, web-config
  libncurses-dev   # top: the full-screen view
  help2man groff-base dpkg-dev   # the man pages and the Debian package
)
test_packages=(
  clang libclang-rt-dev   # clang compiles the tests and fuzzers (libFuzzer runtime)
  libgtest-dev libgmock-dev googletest
  psmisc lsof procps util-linux passwd hyperfine zsh
  jq   # deploy/slurm/prolog.sh reads gpureap ps --json with it (its test runs it)
  tmux   # top: its end-to-end tests drive the real binary in a terminal
  prometheus   # promtool checks the metrics and rules; the fleet test runs a real server
  slurm-wlm munge   # tests/slurm: a two-node Slurm cluster runs the shipped deploy/slurm scripts
  runc   # the container tests run real OCI containers (podman and crun refuse a hybrid cgroup host)
  rpm debootstrap   # package.sh's RPM (rpmbuild) and package-check's rpm; the Debian 11 root (glibc-sysroot.sh)
)

case ${1:-test} in
  build) packages=("${build_packages[@]}") ;;
  test) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  *) echo "setup-deps: unknown set '$1' (use build or test)" >&2; exit 2 ;;
esac
"$root/scripts/install-quietly.sh" "${packages[@]}"
# NVIDIA's real MPS binaries for the tests (unpacked in a cache, nothing installed)
if [ "${1:-test}" = test ]; then bash "$root/scripts/fetch-nvidia-mps.sh" || true; fi
