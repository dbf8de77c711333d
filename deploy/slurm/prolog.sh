#!/bin/bash
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/prolog.d/gpureap.sh): refuse to start a job on a
# GPU that still holds memory or runs a process (a previous job's leftovers), naming the GPU and
# what holds it. A non-zero exit makes Slurm drain the node and requeue the job; the prolog sets
# the drain reason to the busy GPUs and their processes.
#
# Environment: SLURM_JOB_GPUS (or CUDA_VISIBLE_DEVICES) the job's GPU indices; GPUREAP (the
# binary, default /usr/bin/gpureap); GPUREAP_BUSY_MIB (memory above which a GPU counts as
# busy, default 512: above the driver's per-context overhead); SLURMD_NODENAME (set by slurmd:
# the node is drained with the reason) and SCONTROL (default /usr/bin/scontrol). Needs jq.
set -u

gpureap=${GPUREAP:-/usr/bin/gpureap}
scontrol=${SCONTROL:-/usr/bin/scontrol}
gpus=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}
busy_mib=${GPUREAP_BUSY_MIB:-512}

job=${SLURM_JOB_ID:-?}
[[ $job =~ ^[0-9]+$|^\?$ ]] || job=${job@Q}  # quoted: a newline or escape must not forge a log line
say() { printf 'gpureap prolog (job %s): %s\n' "$job" "$*" >&2; }

[[ -z $gpus ]] && exit 0
if [[ ! $gpus =~ ^[0-9,]+$ || ! $busy_mib =~ ^[0-9]+$ ]]; then
  say "SLURM_JOB_GPUS must be GPU indices (got ${gpus@Q}) and GPUREAP_BUSY_MIB a number"
  exit 2
fi

# A node without NVIDIA GPUs (no NVIDIA library, no GPU in NVML, AMD or Intel GPUs in sysfs):
# Slurm's indices there follow gres.conf's order, which nothing in the kernel ties to a GPU, so
# every AMD and Intel GPU of the node is checked.
report=$("$gpureap" ps --json)
rc=$?
if [[ $rc -ne 0 ]]; then
  say "gpureap ps exited $rc (3: no driver library, 4: the driver failed to initialise, 5: a GPU reported an error): cannot prove the GPUs are free"
  exit "$rc"
fi
if jq -e '(.driver.loaded | not) and (.gpus | length == 0) and (.drm_gpus | length > 0)' <<<"$report" >/dev/null; then
  # One line per busy GPU: its PCI address, used VRAM, and the processes holding a client of it
  # or a KFD context on it.
  busy=$(jq -r --argjson limit "$((busy_mib * 1024 * 1024))" '
    .drm_gpus[] | ([.clients[].pids[]] + [.kfd_processes[] | .pid] | unique) as $p |
    select(((.memory.used_bytes // 0) > $limit) or ($p | length > 0)) |
    "GPU \(.pci_bus_id): \(((.memory.used_bytes // 0) / 1048576) | floor) MiB used; processes: \(
      if ($p | length) == 0 then "none listed (run gpureap doctor)" else ($p | map(tostring) | join(", ")) end)"
  ' <<<"$report")
else
  report=$("$gpureap" ps --json --gpu "$gpus")
  rc=$?
  if [[ $rc -ne 0 ]]; then
    say "gpureap ps exited $rc (3: no driver library, 4: the driver failed to initialise, 5: a GPU reported an error): cannot prove the GPUs are free"
    exit "$rc"
  fi
  # One line per busy GPU: index, used memory, and the processes the driver lists or that hold it.
  busy=$(jq -r --argjson limit "$((busy_mib * 1024 * 1024))" '
    . as $r | $r.gpus[] | . as $g | [$r.processes[] | select(.gpu == $g.index)] as $p |
    select((($g.memory.used_bytes // 0) > $limit) or ($p | length > 0)) |
    "GPU \($g.index): \((($g.memory.used_bytes // 0) / 1048576) | floor) MiB used; processes: \(
      [$p[] | "\(.pid) (\(.user // "?"))"] | if length == 0 then "none listed (run gpureap doctor)" else join(", ") end)"
  ' <<<"$report")
fi
if [[ -n $busy ]]; then
  while IFS= read -r line; do say "not starting: $line"; done <<<"$busy"
  # Slurm's own reason would say only "Prolog error": the node is drained first with this one.
  node=${SLURMD_NODENAME:-}
  if [[ $node =~ ^[A-Za-z0-9._-]+$ && -x $scontrol ]]; then
    "$scontrol" update NodeName="$node" State=DRAIN \
      Reason="gpureap prolog: job $job: $(tr '\n' ' ' <<<"$busy" | cut -c1-200)" >&2
  fi
  exit 1
fi
exit 0
