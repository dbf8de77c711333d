#!/bin/bash
# Slurm Epilog (slurm.conf: Epilog=/etc/slurm/epilog.d/gpureap.sh): at the end of every job,
# end what the job left behind on its GPUs and prove the GPUs are empty. A non-zero exit makes
# slurmd drain the node; the epilog sets the drain reason to what survived (PID, state, wchan
# for D), which slurmd's log also holds.
#
# What the job owns:
#   - cgroup v2 (Slurm's cgroup/v2 plugin): the job's cgroup,
#     <cgroup2 mount>/system.slice/slurmstepd.scope/job_<SLURM_JOB_ID>, narrowed to the job's
#     user (never slurmstepd, which runs as root in step_*/slurm) and its GPUs.
#   - otherwise: the job's user's GPU processes on the job's GPUs (--uid + --gpus). This
#     assumes the GPUs were allocated to this job exclusively (gres, ConstrainDevices=yes): any
#     process of that user on those GPUs is then this job's. A job without GPUs is left alone
#     in this mode (--uid alone would reach the user's other jobs). On a node without NVIDIA
#     GPUs (AMD or Intel only, seen through jq) Slurm's indices name no GPU gpureap can prove:
#     there the job's user's GPU processes on the node are reaped (exclusive nodes).
#
# Environment (set by slurmd unless noted):
#   SLURM_JOB_ID, SLURM_JOB_UID      required
#   SLURM_JOB_GPUS                   the job's GPU indices; CUDA_VISIBLE_DEVICES as a fallback
#   GPUREAP                          the gpureap binary (default /usr/bin/gpureap)
#   GPUREAP_CGROUP_ROOT              the cgroup v2 mount (default: read from /proc/self/mountinfo)
#   GPUREAP_SLURM_SCOPE              the scope below it (default system.slice/slurmstepd.scope;
#                                    <nodename>_slurmstepd.scope with several slurmd per host)
#   GPUREAP_AUDIT_LOG                audit log of every signal (default /var/log/gpureap/reap.log)
#   GPUREAP_KILL_TIMEOUT             SIGTERM to SIGKILL (default 10s)
#   GPUREAP_VERIFY_TIMEOUT           wait for the memory to come back (default 30s)
#   SLURMD_NODENAME                  the node drained, with gpureap's reason, when the reap fails
#   SCONTROL                         scontrol (default /usr/bin/scontrol)
#
# No shell string is ever built from these values: they go to gpureap as separate arguments.
set -u

gpureap=${GPUREAP:-/usr/bin/gpureap}
scontrol=${SCONTROL:-/usr/bin/scontrol}
job=${SLURM_JOB_ID:-}
uid=${SLURM_JOB_UID:-}
gpus=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}

say() { printf 'gpureap epilog (job %s): %s\n' "$job" "$*" >&2; }

if [[ ! $job =~ ^[0-9]+$ || ! $uid =~ ^[0-9]+$ ]]; then
  # Quoted (${x@Q}): a newline or an escape sequence in them must not forge or garble a log line.
  job=${job@Q}
  say "SLURM_JOB_ID and SLURM_JOB_UID must be numbers (got ${job} and ${uid@Q}): is this running as Slurm's Epilog?"
  exit 2
fi
if [[ ! $gpus =~ ^[A-Za-z0-9,:-]*$ ]]; then
  say "unexpected characters in the job's GPU list ${gpus@Q}; not reaping"
  exit 2
fi

root=${GPUREAP_CGROUP_ROOT:-}
if [[ -z $root ]]; then
  # The mount point (field 5) of the line whose filesystem type (after " - ") is cgroup2.
  root=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") { print $5; exit } break } }' \
    /proc/self/mountinfo)
fi
cgroup=""
if [[ -n $root ]]; then
  cgroup="$root/${GPUREAP_SLURM_SCOPE:-system.slice/slurmstepd.scope}/job_$job"
fi

args=(reap --uid "$uid" --except slurmstepd
      --audit-log "${GPUREAP_AUDIT_LOG:-/var/log/gpureap/reap.log}"
      --kill-timeout "${GPUREAP_KILL_TIMEOUT:-10s}" --verify-timeout "${GPUREAP_VERIFY_TIMEOUT:-30s}")
if [[ -n $cgroup && -d $cgroup ]]; then
  args+=(--cgroup "$cgroup")
elif [[ -z $gpus ]]; then
  say "no job cgroup and no GPUs allocated: nothing to reap"
  exit 0
fi
# A node without NVIDIA GPUs (AMD or Intel only): Slurm's indices there follow gres.conf's order,
# which nothing in the kernel ties to a GPU, so they narrow nothing: the job's cgroup, or its
# user's GPU processes on the node, are the job's (the node's GPUs are the job's alone).
nvidia_less=0
if command -v jq >/dev/null && report=$("$gpureap" ps --json 2>/dev/null) &&
  jq -e '(.driver.loaded | not) and (.gpus | length == 0) and (.drm_gpus | length > 0)' <<<"$report" >/dev/null 2>&1; then
  nvidia_less=1
fi
[[ -n $gpus && $nvidia_less == 0 ]] && args+=(--gpus "$gpus")

mkdir -p -m 0700 "$(dirname "${GPUREAP_AUDIT_LOG:-/var/log/gpureap/reap.log}")" 2>/dev/null
out=$("$gpureap" "${args[@]}" 2>&1)
rc=$?
printf '%s\n' "$out" >&2
if [[ $rc -ne 0 ]]; then
  say "gpureap reap exited $rc (6: something of the job remains, see above; 3/4: the driver could not be read): Slurm drains this node"
  # Slurm's own reason would say only "Epilog error": the node is drained first with gpureap's,
  # naming the survivors (gpureap's output is sanitised; scontrol gets it as one argument).
  node=${SLURMD_NODENAME:-}
  if [[ $node =~ ^[A-Za-z0-9._-]+$ && -x $scontrol ]]; then
    summary=$(printf '%s\n' "$out" | grep -m 3 -E '^ *survivor PID' | sed 's/^ *//' | tr '\n' ' ' | cut -c1-200)
    "$scontrol" update NodeName="$node" State=DRAIN \
      Reason="gpureap epilog: job $job: reap exit $rc: ${summary:-see the slurmd log}" >&2
  fi
fi
exit "$rc"
