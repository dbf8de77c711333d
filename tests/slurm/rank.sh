#!/bin/bash
# One rank of a training job as the Slurm scenarios run it: GPU memory on the GPU Slurm gave it
# (CUDA_VISIBLE_DEVICES, set by Slurm from gres.conf), two forked DataLoader-style workers that
# inherit it, and a double-forked loader (an orphan from its start, as a daemonised helper is).
# Writes the READY lines (PIDs) to $CLUSTER_DIR/pids/TAG-<node>-<local rank>{,.loader}.
# Usage: rank.sh TAG [gpusim-cuda options for the rank]
set -eu
tag=$1
shift
dir=${CLUSTER_DIR:?}
node=${SLURMD_NODENAME:?}
local_rank=${SLURM_LOCALID:-0}
export GPUSIM_STATE_DIR=$dir/$node/sim
# The cluster's copies: the build tree the simulator names may be closed to the job's user.
export GPUSIM_LIBCUDA_LIBRARY=$dir/bin/libcuda.so.1 GPUREAP_NVML_LIBRARY=$dir/bin/libnvidia-ml.so.1
IFS=, read -ra gpus <<<"${CUDA_VISIBLE_DEVICES:?}"
gpu=${gpus[local_rank % ${#gpus[@]}]}
out=$dir/pids/$tag-$node-$local_rank
exec 2>>"$out.err"  # sbatch's own output goes nowhere: why a rank failed stays here
( exec "$dir/bin/gpusim-cuda" --alloc "$gpu:1GiB" --name loader >"$out.loader" </dev/null & )
exec "$dir/bin/gpusim-cuda" --alloc "$gpu:2GiB" --workers 2 --name rank "$@" >"$out"
