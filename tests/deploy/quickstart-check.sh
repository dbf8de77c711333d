#!/usr/bin/env bash
# The README's quick start (scripts/quickstart.sh) on this host, with the build tree under test in
# place of its release build: on a host with no GPU it must show the labelled demo on simulated
# GPUs (holders, orphans, the leak doctor finds) and leave none of the demo's processes or files;
# on a host with a GPU, this host's listing and no demo.
# Usage: quickstart-check.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$1 build=$2
fail() { echo "quickstart-check: $*" >&2; exit 1; }
# The quick start runs with a user's environment, not a test's simulator settings.
unset GPUSIM_STATE_DIR GPUREAP_DEV_DIR GPUREAP_SYS_DIR GPUREAP_FDINFO_DIR GPUREAP_NVML_LIBRARY

demos_before=$(find /tmp -maxdepth 1 -name 'gpureap-demo-*' | wc -l)
status=0
output=$(GPUREAP_BUILD_DIR=$build timeout 120 bash "$source_dir/scripts/quickstart.sh" 2>&1) || status=$?
[ "$status" -eq 0 ] || { printf '%s\n' "$output"; fail "exited $status"; }

listing=$("$build/src/gpureap" ps --json 2>/dev/null) || listing=
if grep -q '^  "gpus": \[\]' <<<"$listing" && grep -q '^  "drm_gpus": \[\]' <<<"$listing"; then
  for expected in \
    'No GPU here (no NVIDIA driver, no AMD or Intel GPU): showing gpureap on simulated GPUs instead.' \
    'SIMULATED GPUs: no NVIDIA driver on this host' \
    'gpureap ps   (simulated GPUs)' \
    'worker of [0-9]* (inherited)' \
    'ORPHAN: keeps [0-9]*.s memory' \
    'amd GPU 0000:c1:00.0  amdgpu' \
    'CRITICAL  GPU 1: 3.0 GiB in use with no process holding the GPU' \
    'WARNING   GPU 0: 6.0 GiB kept in use by 2 orphaned process'; do
    grep -q -- "$expected" <<<"$output" || { printf '%s\n' "$output"; fail "no line matching: $expected"; }
  done
  # The demo cleans up: its state directory and every process it started are gone.
  demos_after=$(find /tmp -maxdepth 1 -name 'gpureap-demo-*' | wc -l)
  [ "$demos_after" -eq "$demos_before" ] || fail "the demo left its state directory ($demos_before before, $demos_after after)"
  # (Its processes are known by the state directory in their environment; SIGKILL takes effect
  # a moment after the demo exits, so wait a bounded time for the last to go.)
  demo_processes() { grep -l -s -a 'GPUSIM_STATE_DIR=/tmp/gpureap-demo-' /proc/[0-9]*/environ || true; }
  for _ in $(seq 1 50); do [ -z "$(demo_processes)" ] && break; sleep 0.1; done
  [ -z "$(demo_processes)" ] || fail "the demo left processes: $(demo_processes | tr '\n' ' ')"
  echo "quickstart-check: no GPU here; the labelled demo ran and cleaned up"
else
  ! grep -q 'SIMULATED' <<<"$output" || fail "a host with a GPU was shown the simulated demo"
  echo "quickstart-check: this host has a GPU; its listing was shown, no demo"
fi
