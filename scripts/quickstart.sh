#!/usr/bin/env bash
# Builds gpureap and runs the main job: `gpureap ps` on this host's GPUs. On a host without an
# NVIDIA driver, says so and runs the demo on simulated GPUs instead (clearly labelled).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh" release
set +e
"$root/build/src/gpureap" ps
rc=$?
set -e
if [ "$rc" -eq 3 ] || [ "$rc" -eq 4 ]; then
  echo
  echo "No usable NVIDIA driver here (exit status $rc): showing gpureap on simulated GPUs instead."
  echo
  exec "$root/demo/simulated-demo.sh"
fi
exit "$rc"
