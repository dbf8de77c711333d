#!/usr/bin/env bash
# Runs the tarball's gpureap on an older system than the one it was built on: in a Debian 11
# root (glibc 2.31; scripts/glibc-sysroot.sh's, the one the release program links against),
# entered with chroot, in a mount namespace of its own with /proc and /sys bound in, on a
# simulated GPU whose memory two real processes hold: `ps` shows both, `kill` ends one and the
# other survives, `doctor` reads the machine, `run` starts a job and passes on its status;
# `fleet` says why its HTTP module does not load
# there (it needs Debian 12's libraries). Needs root.
# Usage: scripts/old-glibc-check.sh [TARBALL]   (default: what scripts/package.sh built)
# The simulator's NVML library loads inside the root, so it comes from the release build, which
# links it as it links gpureap (sim/CMakeLists.txt).
# Time: ~10 s once the root is cached; making the root (debootstrap) takes 1-4 minutes and the
# network, which scripts/package.sh pays first. Exit status 77: skipped (the reason is printed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${GPUREAP_PACKAGE_DIR:-$root/build-release}
# shellcheck source=scripts/check-messages.sh
source "$root/scripts/check-messages.sh"  # say, die, skip

[ "$(id -u)" -eq 0 ] || skip "needs root (chroot, a mount namespace)"
# All of it in a mount namespace of its own, where /proc and /sys are bound into the root and
# vanish with the namespace. The simulated holders run in it too: a descriptor's path in
# /proc/<pid>/fd reads relative to the root only for a file opened in the same namespace.
if [ -z "${GPUREAP_OLD_GLIBC_NAMESPACE:-}" ]; then
  exec unshare --mount --propagation private env GPUREAP_OLD_GLIBC_NAMESPACE=1 bash "$0" "$@"
fi
tarball=${1:-}
if [ -z "$tarball" ]; then
  tarballs=("$dir"/gpureap-*-linux-x86_64.tar.gz)
  tarball=${tarballs[0]}
fi
[ -f "$tarball" ] || die "no tarball at $tarball: run scripts/package.sh first"
sysroot=$("$root/scripts/glibc-sysroot.sh" --if-cached)
[ -n "$sysroot" ] || skip "no Debian 11 root cached: scripts/glibc-sysroot.sh makes it (1-4 minutes, network)"
grep -q '^GPUREAP_GLIBC_SYSROOT:PATH=/' "$dir/CMakeCache.txt" 2>/dev/null ||
  die "$dir is not a release build linked against an older glibc (GPUREAP_GLIBC_SYSROOT): scripts/package.sh makes one"
# The control programs run outside the root: any uninstrumented build's (GPUREAP_SIM_BUILD_DIR,
# CI's sanitizer build) will do.
sim_dir=${GPUREAP_SIM_BUILD_DIR:-$dir}
cmake --build "$sim_dir" --target gpusim gpusim-cuda -j "$(nproc)" >/dev/null
cmake --build "$dir" --target gpusim_nvml_r550 -j "$(nproc)" >/dev/null
nvml=$dir/sim/drivers/r550/libnvidia-ml.so.1

# Everything the root's programs see lies in one directory inside it ($inside there).
work=$(mktemp -d "$sysroot/tmp/gpureap-old-glibc-XXXXXX")
inside=${work#"$sysroot"}
holders=()
cleanup() {
  for group in "${holders[@]}"; do kill -KILL -- "-$group" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
tar -xzf "$tarball" -C "$work"
top=$(basename "$tarball" .tar.gz)
cp "$nvml" "$work/libnvidia-ml.so.1"

mount --bind /proc "$sysroot/proc"
mount --bind /sys "$sysroot/sys"

# in_root COMMAND...: runs COMMAND in the Debian 11 root with the simulator's environment.
in_root() {
  chroot "$sysroot" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
    GPUSIM_STATE_DIR="$inside/state" GPUREAP_DEV_DIR="$inside/state/dev" \
    GPUREAP_NVML_LIBRARY="$inside/libnvidia-ml.so.1" GPUREAP_AUDIT_LOG="$inside/audit.log" "$@"
}
glibc=$(in_root /lib/x86_64-linux-gnu/libc.so.6 | sed -n '1s/.*version \([0-9]*\.[0-9]*\).*/\1/p')
[ -n "$glibc" ] || die "the root at $sysroot does not run its own C library"
bin=$inside/$top/bin/gpureap
version=$(in_root "$bin" --version) || die "$top/bin/gpureap does not start under glibc $glibc: $version"
say "$version runs under glibc $glibc (Debian 11 root at $sysroot)"

# Two processes hold the simulated GPU's memory: the target, and a bystander that must survive.
gpu_name="NVIDIA A100 80GB (old glibc check)"
"$sim_dir/sim/gpusim" --state "$work/state" init --gpus 1 --memory 80GiB --name "$gpu_name" >/dev/null
# start_holder NAME SIZE: a holder in its own process group (which cleanup ends), its PID in
# $holder. In this shell, not a command substitution's: cleanup must know every group.
start_holder() {
  setsid "$sim_dir/sim/gpusim-cuda" --state "$work/state" --alloc "0:$2" >"$work/$1.ready" 2>"$work/$1.log" </dev/null &
  holders+=("$!")
  disown "$!"  # ended on purpose by kill or cleanup: no "Killed" notice
  for _ in $(seq 1 200); do grep -q READY "$work/$1.ready" && break; sleep 0.05; done
  holder=$(sed -n 's/^READY pid=\([0-9]*\).*/\1/p' "$work/$1.ready")
}
start_holder target 2GiB
target=$holder
start_holder bystander 1GiB
bystander=$holder
[ -n "$target" ] && [ -n "$bystander" ] || die "the simulated CUDA processes did not start: $(cat "$work"/*.log)"

table=$(in_root "$bin" ps --color never) || die "gpureap ps exited $? under glibc $glibc: $table"
[[ $table == *"$gpu_name"* ]] || die "ps under glibc $glibc does not show the simulated GPU:"$'\n'"$table"
grep -qE "^ *$target .*2\.0 GiB" <<<"$table" && grep -qE "^ *$bystander .*1\.0 GiB" <<<"$table" ||
  die "ps under glibc $glibc does not show PID $target (2.0 GiB) and PID $bystander (1.0 GiB):"$'\n'"$table"
say "ps shows the simulated GPU and both holders:"
echo "$table"

set +e
report=$(in_root "$bin" kill --yes --color never "$target" 2>&1)
status=$?
set -e
[ "$status" -eq 0 ] || die "gpureap kill $target exited $status under glibc $glibc:"$'\n'"$report"
# kill returns once the target is gone and its memory verified free: it is gone now (a zombie
# until this shell, its parent, reaps it).
! kill -0 "$target" 2>/dev/null || [[ $(ps -o stat= -p "$target") == Z* ]] ||
  die "PID $target is still running after gpureap kill reported success:"$'\n'"$report"
kill -0 "$bystander" 2>/dev/null || die "the bystander PID $bystander is gone after gpureap kill $target:"$'\n'"$report"
table=$(in_root "$bin" ps --color never) || die "gpureap ps exited $? after the kill"
grep -qE "^ *$bystander .*1\.0 GiB" <<<"$table" && ! grep -qE "^ *$target " <<<"$table" ||
  die "after the kill, ps does not show the bystander alone:"$'\n'"$table"
say "kill ended PID $target and verified its memory free; the bystander PID $bystander still holds its 1.0 GiB:"
echo "$report"

set +e
report=$(in_root "$bin" doctor --color never 2>&1)
status=$?
set -e
# 0 healthy, 1 warnings, 2 critical findings: each a reading of the machine; anything else is not.
[ "$status" -le 2 ] || die "gpureap doctor exited $status under glibc $glibc:"$'\n'"$report"
[[ $report == *"$gpu_name"* || $report == *"GPU 0"* ]] || die "doctor under glibc $glibc does not report GPU 0:"$'\n'"$report"
say "doctor under glibc $glibc (exit $status):"
echo "$report"
# run starts a job through the spawn helper (clone3 or fork) and passes on its status.
set +e
report=$(in_root "$bin" run -- /bin/sh -c 'echo job ran; exit 3' 2>&1)
status=$?
set -e
[ "$status" -eq 3 ] && [[ $report == *"job ran"* ]] ||
  die "gpureap run under glibc $glibc exited $status (3, the job's, expected):"$'\n'"$report"
say "run under glibc $glibc started a job and passed on its exit status 3"

# The HTTP module needs Debian 12's libraries (README, Install): fleet says which one is missing.
set +e
report=$(in_root "$bin" fleet --prometheus http://127.0.0.1:1 --timeout 2 2>&1)
status=$?
set -e
[ "$status" -eq 1 ] && [[ $report == *"cannot load the HTTP module"*"README.md, Install"* ]] ||
  die "fleet under glibc $glibc exited $status without saying why its HTTP module does not load:"$'\n'"$report"
say "fleet under glibc $glibc, where the HTTP module's libraries are missing (exit 1): $report"
say "passed: the tarball's gpureap runs ps, kill, doctor and run under glibc $glibc"
