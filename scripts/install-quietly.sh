#!/usr/bin/env bash
# Installs Debian packages without enabling or starting any service they carry: Debian starts
# prometheus (listening on every address, no authentication), munged, slurmctld and slurmd on
# install, and enables them at boot. The tests start their own; a host that only builds gpureap
# must not gain a network service.
# Usage: scripts/install-quietly.sh PACKAGE... (names, or paths of .deb files)
# Idempotent: does nothing when every named package is already installed.
#
# How: a /usr/sbin/policy-rc.d that refuses every action (exit 101, policy-rc.d(8)) while apt
# runs, so that invoke-rc.d and deb-systemd-invoke start nothing; the one that was there before
# (a container image's, or none) is put back on every exit, Ctrl-C included. policy-rc.d does not
# stop a package from enabling its service at boot, so the links the install added under
# /etc/systemd/system and /etc/rc?.d are then removed the way an administrator disables a
# service (update-rc.d disable, else the link itself): Debian keeps it disabled on upgrades.
set -euo pipefail

(($# > 0)) || { echo "install-quietly: name the packages to install" >&2; exit 2; }
# One dpkg-query for every name (one each took 2.6 s for the tests' ~45): those installed.
names=()
for p in "$@"; do [[ $p == */*.deb ]] || names+=("$p"); done
declare -A installed=()
if ((${#names[@]} > 0)); then
  while read -r name status; do
    [ "$status" = "install ok installed" ] && installed[${name%%:*}]=1
  done < <(dpkg-query -W -f='${Package} ${Status}\n' "${names[@]}" 2>/dev/null || true)
fi
missing=()
for p in "$@"; do
  case $p in
    */*.deb) missing+=("$p") ;;  # a file: apt decides whether it is new
    *) [ -n "${installed[$p]:-}" ] || missing+=("$p") ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-quietly: need root to install: ${missing[*]}" >&2; exit 1; }
  exec sudo "$0" "${missing[@]}"
fi

policy=/usr/sbin/policy-rc.d  # the path invoke-rc.d asks
saved=$policy.gpureap-saved
# A run killed outright (SIGKILL) leaves the original beside ours: put it back first.
if [ -e "$saved" ] || [ -L "$saved" ]; then
  echo "install-quietly: restoring $policy from $saved (left by an interrupted run)" >&2
  mv -f "$saved" "$policy"
elif [ -e "$policy.gpureap-none" ]; then
  rm -f "$policy" "$policy.gpureap-none"
fi

# Enabled services: the links under /etc/systemd/system (wants, requires, aliases) and the
# start links of the SysV runlevels.
links() {
  { find /etc/systemd/system -type l 2>/dev/null; ls -d /etc/rc[0-6S].d/S* 2>/dev/null; } | sort
}
before=$(mktemp)
links >"$before"

# Disables what the install enabled: also after a Ctrl-C, which apt defers until dpkg is done.
disable_new_links() {
  local link name disabled=()
  while IFS= read -r link; do
    name=${link##*/}
    case $link in
      /etc/rc?.d/S*) name=${name#S[0-9][0-9]} ;;
      *) [ "$(readlink "$link")" = /dev/null ] && continue ;;  # a mask stops a service: kept
    esac
    name=${name%.service}
    [ -x "/etc/init.d/$name" ] && update-rc.d "$name" disable >/dev/null 2>&1
    rm -f "$link"  # (update-rc.d leaves a unit's aliases and the links it does not know)
    disabled+=("$name")
  done < <(links | comm -13 "$before" -)
  if [ ${#disabled[@]} -gt 0 ]; then
    echo "install-quietly: disabled what the packages enabled: $(printf '%s\n' "${disabled[@]}" | sort -u | paste -sd ' ')" >&2
  fi
}
restore_policy() {
  if [ -e "$saved" ] || [ -L "$saved" ]; then
    mv -f "$saved" "$policy"
  else
    rm -f "$policy" "$policy.gpureap-none"
  fi
}
trap 'disable_new_links; restore_policy; rm -f "$before"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -e "$policy" ] || [ -L "$policy" ]; then
  mv -f "$policy" "$saved"
else
  : >"$policy.gpureap-none"  # (so that a killed run knows there was none)
fi
printf '#!/bin/sh\n# scripts/install-quietly.sh: no service starts during this install.\nexit 101\n' >"$policy"
chmod 0755 "$policy"

echo "install-quietly: installing ${missing[*]} (no service is started or enabled)" >&2
export DEBIAN_FRONTEND=noninteractive
# (A .deb file needs no package index: only names do.)
if printf '%s\n' "${missing[@]}" | grep -qv '\.deb$'; then apt-get update -qq; fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
