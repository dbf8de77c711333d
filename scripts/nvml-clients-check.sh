#!/usr/bin/env bash
# Runs real NVML clients (nvitop, gpustat, both on nvidia-ml-py's pynvml) against the
# simulated libnvidia-ml.so.1 and fails if any prints a Python traceback in normal use, or
# reports a function the simulated library lacks (FunctionNotFound) even with --debug.
#
# For local use only: CI cannot fetch the clients (they are not Debian packages, and CI has
# no PyPI). Lay out their sources yourself, untouched, in one folder:
#   CLIENTS/pynvml.py        nvidia-ml-py's module (e.g. from its sdist)
#   CLIENTS/nvitop/          the nvitop package folder of XuehaiPan/nvitop
#   CLIENTS/gpustat/         the gpustat package folder of wookayin/gpustat, plus a
#                            gpustat/_version.py with `version` and `version_tuple` (setuptools-scm
#                            writes it at install time)
# and install their dependencies from Debian: apt-get install python3-psutil python3-blessed
#
# Usage: scripts/nvml-clients-check.sh CLIENTS [BUILD_DIR] [GENERATION]
#   BUILD_DIR defaults to build-dev, GENERATION (a folder of BUILD_DIR/sim/drivers) to r550.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clients=$(cd "${1:?usage: nvml-clients-check.sh CLIENTS [BUILD_DIR] [GENERATION]}" && pwd)
build=$(cd "${2:-$root/build-dev}" && pwd)
gen=${3:-r550}
python=${PYTHON:-/usr/bin/python3}
lib_dir="$build/sim/drivers/$gen"
[ -f "$lib_dir/libnvidia-ml.so.1" ] || { echo "no simulated library in $lib_dir (build gpusim_drivers)" >&2; exit 2; }

state=$(mktemp -d)
out=$(mktemp -d)
pids=()
mps_pipe="$state/mps/pipe"
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  # The MPS control daemon (and its server) started below, through its own pipe directory.
  [ -S "$mps_pipe/control" ] && echo quit | CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" "$build/sim/bin/nvidia-cuda-mps-control" || true
  rm -rf "$state" "$out"
}
trap cleanup EXIT

"$build/sim/gpusim" --state "$state" init --gpus 2 >/dev/null
# A busy process on GPU 0 (P0, per-process samples), GPU 1 idle (P8).
# --exit-after: it ends by itself should this script be killed before its trap runs.
"$build/sim/gpusim-cuda" --state "$state" --alloc 0:4GiB --sm-util 30 --mem-util 10 \
  --exit-after 300000 --name python3 >"$out/cuda" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q READY "$out/cuda" && break; sleep 0.05; done
grep -q READY "$out/cuda" || { echo "gpusim-cuda did not start:" >&2; cat "$out/cuda" >&2; exit 1; }

# MPS on GPU 1: a control daemon with a private pipe and log directory, one client (listed by
# the MPS call) and the server (a compute process), as NVIDIA's MPS shows them.
mkdir -p "$state/mps"
CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" CUDA_MPS_LOG_DIRECTORY="$state/mps/log" GPUSIM_STATE_DIR="$state" \
  "$build/sim/bin/nvidia-cuda-mps-control" -d
CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" "$build/sim/gpusim-cuda" --state "$state" --alloc 1:1GiB \
  --exit-after 300000 --name mps-client >"$out/mps" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q READY "$out/mps" && break; sleep 0.05; done
grep -q READY "$out/mps" || { echo "the MPS client did not start:" >&2; cat "$out/mps" >&2; exit 1; }

# pynvml loads "libnvidia-ml.so.1" by soname, so the library path chooses the generation.
export GPUSIM_STATE_DIR="$state" LD_LIBRARY_PATH="$lib_dir" PYTHONPATH="$clients"
failed=0
check() {
  local name=$1 forbidden=$2; shift 2
  local log="$out/$name.log"
  local rc=0
  timeout 60 "$python" "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL $name: exit status $rc"; failed=1
  elif grep -Eq "$forbidden" "$log"; then
    echo "FAIL $name: output matches /$forbidden/"; failed=1
  else
    echo "ok   $name"
  fi
  sed 's/^/     /' "$log"
}
check nvitop-once 'Traceback|FunctionNotFound' -m nvitop --once
check gpustat-all 'Traceback|FunctionNotFound' -m gpustat -a
check gpustat-json 'Traceback|FunctionNotFound' -m gpustat -a --json
# --debug prints a traceback for every failed query, NOT_SUPPORTED included (the fan on an
# SXM board, as on a real H100); only a missing function is a fault of the simulator.
check gpustat-debug 'FunctionNotFound|Function Not Found' -m gpustat -a --debug
exit "$failed"
