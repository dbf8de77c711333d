#!/bin/bash
# Slurm HealthCheckProgram (slurm.conf: HealthCheckProgram=/etc/slurm/gpureap-healthcheck.sh).
# Slurm takes no action on a health check's exit status while slurmd runs: the program must
# drain the node itself. This one runs `gpureap doctor` and drains on a critical finding.
#
#   doctor 0  healthy (or information only)          -> nothing
#   doctor 1  warnings (orphaned holders, D state...) -> logged; set GPUREAP_DRAIN_ON_WARNING=1 to drain
#   doctor 2  critical (no driver, lost GPU, leak...) -> drain
#   doctor 11 doctor could not run (bad option/input) -> drain: the node's health is unknown
#
# Environment: GPUREAP (default /usr/bin/gpureap), SCONTROL (default /usr/bin/scontrol).
set -u
gpureap=${GPUREAP:-/usr/bin/gpureap}
scontrol=${SCONTROL:-/usr/bin/scontrol}

# --since: an Xid from hours ago must not keep the node drained; --no-kernel-log is not used,
# so a fresh Xid that needs a reset still counts.
out=$("$gpureap" doctor --since 1h --settle 2 2>&1)
rc=$?
summary=$(printf '%s\n' "$out" | grep -m 2 -E '^(CRITICAL|WARNING)' | tr '\n' ' ' | cut -c1-200)
drain=0
case $rc in
  0) ;;
  1) [[ ${GPUREAP_DRAIN_ON_WARNING:-0} == 1 ]] && drain=1 ;;
  *) drain=1 ;;
esac
if [[ $drain == 1 ]]; then
  "$scontrol" update NodeName="$(hostname -s)" State=DRAIN Reason="gpureap doctor exit $rc: $summary"
fi
exit "$rc"
