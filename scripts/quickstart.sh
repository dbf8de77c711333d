#!/usr/bin/env bash
# Builds gpureap and runs the main job: `gpureap ps` on this host's GPUs. On a host with no GPU
# it can see (no NVIDIA driver and no AMD or Intel GPU), says so and runs the demo on simulated
# GPUs instead (clearly labelled).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# GPUREAP_BUILD_DIR: a tree already built, used as it is (the test of this script uses its own).
if [ -n "${GPUREAP_BUILD_DIR:-}" ]; then
  build=$GPUREAP_BUILD_DIR
else
  build=$root/build
  "$root/scripts/build.sh" release
fi
gpureap=$build/src/gpureap
set +e
"$gpureap" ps
rc=$?
set -e
# No GPU of any kind: NVIDIA's library missing (3, 4), or a host without NVIDIA hardware, where
# ps exits 0, and no DRM GPU either (the two lists of ps's JSON, docs/ps-json.md, both empty).
no_gpu=false
if [ "$rc" -eq 3 ] || [ "$rc" -eq 4 ]; then
  no_gpu=true
elif [ "$rc" -eq 0 ]; then
  listing=$("$gpureap" ps --json 2>/dev/null) || listing=
  if grep -q '^  "gpus": \[\]' <<<"$listing" && grep -q '^  "drm_gpus": \[\]' <<<"$listing"; then
    no_gpu=true
  fi
fi
if [ "$no_gpu" = true ]; then
  echo
  echo "No GPU here (no NVIDIA driver, no AMD or Intel GPU): showing gpureap on simulated GPUs instead."
  echo
  GPUREAP_BUILD_DIR=$build exec "$root/demo/simulated-demo.sh"
fi
exit "$rc"
