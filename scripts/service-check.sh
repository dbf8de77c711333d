#!/usr/bin/env bash
# Whether installing gpureap's dependencies left a service enabled or listening on this host.
# Usage: scripts/service-check.sh snapshot FILE   records what is enabled and listening now
#        scripts/service-check.sh compare FILE    fails (exit 1), naming each, when a service
#                                                 is enabled or listening that FILE does not hold
# Enabled: a link under /etc/systemd/system (a unit's wants, requires and aliases; masks are
# not) or a start link in /etc/rc?.d. Listening: a TCP socket in LISTEN, a UDP socket bound
# below the ephemeral port range, or a Unix stream socket accepting, in this network namespace,
# held by a daemon (a process whose parent is PID 1, as init scripts and service managers leave
# them): a test's own short-lived servers, children of the test, are not services.
set -euo pipefail

enabled() {
  local link
  while IFS= read -r link; do
    [ "$(readlink "$link")" = /dev/null ] || echo "enabled $link"
  done < <({ find /etc/systemd/system -type l 2>/dev/null; ls -d /etc/rc[0-6S].d/S* 2>/dev/null; } | sort)
}

# "inode owner" for each socket a daemon holds: owner is "comm (pid N)".
daemon_sockets() {
  local fd_dir pid stat rest ppid comm
  for fd_dir in /proc/[0-9]*/fd; do
    pid=${fd_dir#/proc/}
    pid=${pid%/fd}
    { stat=$(<"/proc/$pid/stat"); } 2>/dev/null || continue
    rest=${stat##*) }  # after the name, which may hold spaces and parentheses
    read -r _ ppid _ <<<"$rest"
    [ "$ppid" = 1 ] || continue
    { comm=$(<"/proc/$pid/comm"); } 2>/dev/null || continue
    find "$fd_dir" -lname 'socket:*' -printf '%l\n' 2>/dev/null |
      awk -v owner="$comm (pid $pid)" 'sub(/^socket:\[/, "") && sub(/\]$/, "") { print $0 " " owner }'
  done
}

hex_ipv4() { printf '%d.%d.%d.%d' "0x${1:6:2}" "0x${1:4:2}" "0x${1:2:2}" "0x${1:0:2}"; }

listening() {
  local owners ephemeral_low proto file local_hex state inode address port owner flags path
  owners=$(daemon_sockets)
  ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range)
  for proto in tcp tcp6 udp udp6; do
    file=/proc/net/$proto
    [ -r "$file" ] || continue
    # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    while read -r _ local_hex _ state _ _ _ _ _ inode _; do
      port=$((16#${local_hex##*:}))
      case $proto in
        tcp*) [ "$state" = 0A ] || continue ;;
        udp*) [ "$state" = 07 ] && [ "$port" -lt "$ephemeral_low" ] || continue ;;
      esac
      address=${local_hex%%:*}
      if [ ${#address} -eq 8 ]; then address=$(hex_ipv4 "$address"); else address="[${address}]"; fi
      owner=$(awk -v inode="$inode" '$1 == inode { $1 = ""; print substr($0, 2); exit }' <<<"$owners")
      [ -n "$owner" ] && echo "listening ${proto%6} $address:$port	$owner"
    done < <(tail -n +2 "$file")
  done
  # Num RefCount Protocol Flags Type St Inode Path: flags 00010000 is accepting.
  while read -r _ _ _ flags _ _ inode path; do
    [ "$flags" = 00010000 ] && [ -n "$path" ] || continue
    owner=$(awk -v inode="$inode" '$1 == inode { $1 = ""; print substr($0, 2); exit }' <<<"$owners")
    [ -n "$owner" ] && echo "listening unix $path	$owner"
  done < <(tail -n +2 /proc/net/unix)
}

state() { { enabled; listening; } | sort -u; }

case ${1:-} in
  snapshot)
    [ -n "${2:-}" ] || { echo "service-check: snapshot needs a file" >&2; exit 2; }
    state >"$2" ;;
  compare)
    [ -r "${2:-}" ] || { echo "service-check: compare needs the file a snapshot wrote" >&2; exit 2; }
    # Compared without the owner, which a restarted daemon changes.
    new=$(state | awk -F'\t' 'FILENAME == ARGV[1] { seen[$1]; next } !($1 in seen)' "$2" -)
    if [ -n "$new" ]; then
      echo "service-check: installing the dependencies left these services enabled or listening:" >&2
      sed 's/^/  /; s/\t/  held by /' <<<"$new" >&2
      exit 1
    fi
    echo "service-check: no service was enabled or started" ;;
  *) echo "service-check: usage: service-check.sh snapshot|compare FILE" >&2; exit 2 ;;
esac
