#!/usr/bin/env bash
# A demonstration of `gpureap ps` and `doctor` on SIMULATED GPUs, for hosts without an NVIDIA driver.
# Real processes hold the simulated GPUs (sim/): a training job with DataLoader-style workers,
# a job in its own PID namespace (like a container), a job killed with -9 whose workers still
# hold its memory, and a leaked allocation that no process explains; beside them a simulated
# AMD GPU (sim/drm: sysfs, fdinfo and KFD written for real processes) with a ROCm job and a
# desktop's display client. Cleans up after itself.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUREAP_BUILD_DIR:-$root/build}
for f in "$build/src/gpureap" "$build/sim/gpusim" "$build/sim/gpusim-cuda" "$build/sim/gpusim-drm-client"; do
  [ -x "$f" ] || { echo "demo: $f missing: run scripts/build.sh first" >&2; exit 2; }
done

state=$(mktemp -d /tmp/gpureap-demo-XXXXXX)
groups=()
cleanup() {
  for g in "${groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  rm -rf "$state"
}
trap cleanup EXIT INT TERM

export GPUSIM_STATE_DIR="$state" GPUREAP_DEV_DIR="$state/dev" GPUREAP_SYS_DIR="$state/sys"
export GPUREAP_FDINFO_DIR="$state/fdinfo"
export GPUREAP_NVML_LIBRARY="$build/sim/drivers/r550/libnvidia-ml.so.1"

# Starts a simulated CUDA program in its own process group (remembered for cleanup, so it
# must not run in a subshell) and sets READY to its READY line.
READY=""
start() { start_program "$build/sim/gpusim-cuda" "$@"; }
start_program() {
  local program=$1
  shift
  local out="$state/ready.${#groups[@]}"
  setsid "$program" "$@" >"$out" 2>>"$state/sim.log" </dev/null &
  groups+=($!)
  disown "$!"  # killed on purpose below: no "Killed" job notices
  for _ in $(seq 1 200); do grep -q READY "$out" 2>/dev/null && break; sleep 0.05; done
  READY=$(grep READY "$out") || { echo "demo: ${program##*/} $* did not start:" >&2; cat "$state/sim.log" >&2; exit 1; }
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

banner() {
  local line="================================================================================"
  printf '%s\n  %s\n%s\n' "$line" "$1" "$line"
}

banner "SIMULATED GPUs: no NVIDIA driver on this host. Everything below runs against
  gpureap's GPU simulator (a stand-in libnvidia-ml.so.1) with real Linux processes."

"$build/sim/gpusim" init --gpus 2 --memory 80GiB --name "NVIDIA H100 80GB HBM3 (simulated)" >/dev/null

echo "Scenario:"
echo "  GPU 0: a training job (18 GiB) with 4 DataLoader workers that inherited its descriptors;"
echo "         a second job killed with SIGKILL whose 2 workers still hold its 6 GiB."
echo "  GPU 1: a job in its own PID namespace (as in a container), and 3 GiB leaked by a"
echo "         process that is gone (no holder at all)."
echo "  AMD GPU 0000:c1:00.0 (simulated amdgpu): a ROCm job (12 GiB) whose forked worker shares its"
echo "         DRM client, and a desktop's display client on /dev/dri/card0."
echo
start --alloc 0:18GiB --workers 4 --sm-util 87 --mem-util 45
start --alloc 0:6GiB --workers 2
kill -KILL "$(field pid "$READY")"
if [ "$(id -u)" -eq 0 ] && unshare --pid --fork true 2>/dev/null; then
  start --pidns --alloc 1:9GiB
else
  echo "(not root: the PID-namespace job is left out)"
  start --alloc 1:9GiB
fi
start --alloc 1:3GiB --leak
kill -KILL "$(field pid "$READY")"
"$build/sim/gpusim" drm-add --pci 0000:c1:00.0 --vram 64GiB --card 0 --render 128 --kfd >/dev/null
setsid "$build/sim/gpusim" drm-driver </dev/null >/dev/null 2>>"$state/sim.log" &  # the simulated amdgpu
groups+=($!)
disown "$!"
start_program "$build/sim/gpusim-drm-client" --node renderD128 --vram 12GiB --kfd --workers 1 --busy 70
start_program "$build/sim/gpusim-drm-client" --node card0 --vram 96MiB
sleep 0.3

banner "gpureap ps   (simulated GPUs)"
"$build/src/gpureap" ps || true
echo
banner "gpureap ps --tree   (simulated GPUs)"
"$build/src/gpureap" ps --tree || true
echo
banner "gpureap doctor   (simulated GPUs)"
"$build/src/gpureap" doctor --no-kernel-log --settle 1 || true
echo
echo "Simulated GPUs and their processes are removed on exit. Try it on a real GPU host with:"
echo "  $build/src/gpureap ps"
