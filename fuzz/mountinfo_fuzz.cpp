// /proc/<pid>/mountinfo as doctor reads it for a process stuck in D: mount points are paths
// any user can create (and, with user namespaces or FUSE, mount on).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "doctor/blocked_io.hpp"
#include "fuzz_check.hpp"

using gpureap::mount_for_path;

namespace {

// The input's first line is the path asked about; the rest is the mountinfo text.
void check_raw(std::string_view input) {
  const std::size_t newline = input.find('\n');
  const std::string_view path = input.substr(0, newline);
  const std::string_view text = newline == std::string_view::npos ? "" : input.substr(newline + 1);
  const auto mount = mount_for_path(text, path);
  if (!mount) return;
  FUZZ_CHECK(!path.empty() && path.front() == '/');
  FUZZ_CHECK(!mount->fs_type.empty());
  FUZZ_CHECK(mount->network == gpureap::is_network_filesystem(mount->fs_type));
  // The mount holds the path: "/" or a whole-component prefix of it.
  const std::string& point = mount->mount_point;
  if (point != "/") {
    FUZZ_CHECK(path.substr(0, point.size()) == point);
    FUZZ_CHECK(path.size() == point.size() || path[point.size()] == '/' ||
               path.substr(point.size()) == " (deleted)");
  }
}

// show_mountinfo() escapes space, tab, newline and backslash in paths as \ooo.
std::string kernel_mangle(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\%03o", static_cast<unsigned char>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

// Any directory name comes back whole, and files below it are found on it.
void check_hostile_mount_point(std::string_view name) {
  const std::string point = "/" + std::string(name);
  const std::string text = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
                           "36 22 0:45 / " + kernel_mangle(point) +
                           " rw,relatime shared:2 - nfs4 server:/export rw,vers=4.2\n";
  const auto mount = mount_for_path(text, point + "/file");
  FUZZ_CHECK(mount.has_value());
  FUZZ_CHECK(mount->mount_point == point);
  FUZZ_CHECK(mount->fs_type == "nfs4" && mount->source == "server:/export" && mount->network);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check_raw(input);
  check_hostile_mount_point(input);
  return 0;
}
