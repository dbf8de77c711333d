#!/usr/bin/env bash
# scripts/real-gpu-export-check.sh on the simulator: one simulated GPU, the simulated
# nvidia-smi first on PATH and gpusim-cuda as the holder, so that the script's own logic is
# tested where no GPU is lent (its PyTorch holder is not).
# Usage: real-gpu-export-check-sim.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
state=$(mktemp -d /tmp/gpureap-export-check-sim-XXXXXX)
trap 'rm -rf "$state"' EXIT
export GPUSIM_STATE_DIR=$state GPUREAP_DEV_DIR=$state/dev NO_COLOR=1
export GPUREAP_NVML_LIBRARY=$build/sim/drivers/r550/libnvidia-ml.so.1
export PATH=$build/sim/bin:$PATH GPUREAP=$build/src/gpureap
export GPUREAP_CHECK_HOLDER="$build/sim/gpusim-cuda --alloc 0:3GiB" GPUREAP_CHECK_IDLE_FOR=1s
"$build/sim/gpusim" init --gpus 2 --memory 80GiB >/dev/null
# (Not exec: the trap removes the state directory when the check ends.)
"$source/scripts/real-gpu-export-check.sh"
