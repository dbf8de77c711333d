// /proc/<pid>/mountinfo, parsed once for everyone (the kill engine's cgroup2 lookup, doctor's
// blocked-I/O mounts). Pure: no I/O, so fixtures and fuzzers can feed it anything.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpureap {

struct MountEntry {
  std::string root;         // field 4: the root of the mount within its filesystem
  std::string mount_point;  // field 5, as the reading process sees it
  std::string fs_type;      // after " - ": "cgroup2", "nfs4", "fuse.sshfs"...
  std::string source;       // "server:/export", "/dev/sda1", "cgroup2"...
};

// mountinfo escapes space, tab, newline and backslash as \ooo (\040, \011, \012, \134).
std::string unescape_mount_field(std::string_view text);

// "id parent major:minor root mount_point options [optional...] - fstype source superopts",
// escapes decoded; nullopt for a line that is not one (no " - " separator, a relative
// mount point, no filesystem type).
std::optional<MountEntry> parse_mountinfo_line(std::string_view line);

// Every valid line of a mountinfo file, in order.
std::vector<MountEntry> parse_mountinfo(std::string_view text);

}  // namespace gpureap
