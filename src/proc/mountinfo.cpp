#include "proc/mountinfo.hpp"

#include "proc/parse_util.hpp"

namespace gpureap {

std::string unescape_mount_field(std::string_view text) {
  auto octal = [text](std::size_t i) { return i < text.size() && text[i] >= '0' && text[i] <= '7'; };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out.push_back(static_cast<char>((text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 + (text[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

namespace {

// The next field of a mountinfo line. Fields are separated by single spaces; the kernel
// escapes only space, tab, newline and backslash in them, so '\r', '\v' and '\f' are part of
// a name (a mount point may hold them), not separators. (Found by fuzz/mountinfo_fuzz.cpp.)
std::string_view take_mount_field(std::string_view& line) {
  const std::size_t end = line.find(' ');
  const std::string_view field = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end + 1);
  return field;
}

}  // namespace

std::optional<MountEntry> parse_mountinfo_line(std::string_view line) {
  std::string_view root, mount_point;
  for (int field = 0; field < 5; ++field) {
    root = mount_point;
    mount_point = take_mount_field(line);
  }
  if (mount_point.empty() || mount_point.front() != '/') return std::nullopt;
  for (std::string_view token = take_mount_field(line); token != "-"; token = take_mount_field(line)) {
    if (line.empty() && token.empty()) return std::nullopt;  // no separator: not a mountinfo line
  }
  MountEntry mount;
  mount.root = unescape_mount_field(root);
  mount.mount_point = unescape_mount_field(mount_point);
  mount.fs_type = unescape_mount_field(take_mount_field(line));
  mount.source = unescape_mount_field(take_mount_field(line));
  if (mount.fs_type.empty()) return std::nullopt;
  return mount;
}

std::vector<MountEntry> parse_mountinfo(std::string_view text) {
  std::vector<MountEntry> mounts;
  while (!text.empty()) {
    if (auto mount = parse_mountinfo_line(procfs::take_line(text))) mounts.push_back(std::move(*mount));
  }
  return mounts;
}

}  // namespace gpureap
