// How old a kernel-log event is, where that can be known: for the live /dev/kmsg from the
// seconds since boot it carries, for a saved log only from an absolute time with its offset
// (a dmesg "[ 12.3]" in a file may come from an earlier boot, a syslog "Nov 29 18:29" has no
// year or zone). Used by `doctor --since` so a health check is not held critical forever by an
// Xid from hours ago.
#pragma once

#include <optional>
#include <string_view>

namespace gpureap {

// Seconds since the epoch of "YYYY-MM-DDTHH:MM:SS[.frac](Z|+HHMM|+HH:MM|-...)"; nullopt for
// anything else (including a time without an offset).
std::optional<double> parse_iso8601(std::string_view text);

// Seconds since boot now, from <proc_root>/uptime; nullopt when unreadable.
std::optional<double> uptime_seconds(const char* proc_root = "/proc");

}  // namespace gpureap
