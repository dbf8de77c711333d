#!/bin/bash
# Runs a command with the simulated driver of the node it runs on (SLURMD_NODENAME, set by
# slurmd): what a real node's driver gives every process without asking.
export GPUSIM_STATE_DIR=${CLUSTER_DIR:?}/${SLURMD_NODENAME:?}/sim
export GPUREAP_DEV_DIR=$GPUSIM_STATE_DIR/dev
exec "$@"
