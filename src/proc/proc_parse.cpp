// Parsers for /proc/<pid>/{stat,status,cmdline} and fd link targets.
// parse_cgroup lives in container_parse.cpp.
#include "proc/proc_parse.hpp"

#include <charconv>
#include <climits>

#include "proc/parse_util.hpp"

namespace gpureap {
namespace {

using procfs::take_signed;
using procfs::take_token;
using procfs::take_unsigned;

bool parse_pid(std::string_view text, pid_t& out, bool allow_zero) {
  pid_t value = 0;
  if (!procfs::parse_whole_unsigned(text, value)) return false;
  if (value == 0 && !allow_zero) return false;
  out = value;
  return true;
}

// Undoes the escaping the kernel applies to the Name: line of status ("\n" and "\\").
std::string unescape_status_name(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == 'n' || text[i + 1] == '\\')) {
      out.push_back(text[i + 1] == 'n' ? '\n' : '\\');
      ++i;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// A tab-separated list of unsigned numbers (Uid:, NSpid:). False on anything else.
template <typename T>
bool parse_number_list(std::string_view text, std::vector<T>& out) {
  out.clear();
  for (;;) {
    const std::string_view token = take_token(text);
    if (token.empty()) break;
    T value{};
    if (!procfs::parse_whole_unsigned(token, value)) return false;
    out.push_back(value);
  }
  return !out.empty();
}

}  // namespace

std::optional<StatFields> parse_stat(std::string_view text) {
  // "<pid> (<comm>) <state> <ppid> <pgrp> <session> <tty_nr> <tpgid> <flags> ..." (proc(5)).
  // comm may hold any byte but NUL, including spaces and ')', so cut at the LAST ')'.
  const std::size_t open = text.find('(');
  const std::size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  StatFields fields;
  std::string_view head = text.substr(0, open);
  if (head.empty() || head.back() != ' ') return std::nullopt;
  head.remove_suffix(1);
  if (!parse_pid(head, fields.pid, false)) return std::nullopt;
  fields.comm.assign(text.substr(open + 1, close - open - 1));

  std::string_view rest = text.substr(close + 1);
  if (rest.size() < 2 || rest[0] != ' ') return std::nullopt;
  const std::string_view state = take_token(rest);
  if (state.size() != 1) return std::nullopt;
  fields.state = state[0];

  // Fields 4.. of proc(5), counted from ppid: the ones kept, by position.
  enum : int { kPpid = 0, kPgrp = 1, kSession = 2, kFlags = 5, kUtime = 10, kStime = 11,
               kNumThreads = 16, kStartTime = 18, kRss = 20 };
  for (int index = 0; index <= kRss; ++index) {
    std::string_view token = take_token(rest);
    if (token.empty()) return std::nullopt;  // truncated
    bool ok = true;
    switch (index) {
      case kPpid: ok = parse_pid(token, fields.ppid, true); break;
      case kPgrp: ok = parse_pid(token, fields.pgid, true); break;
      case kSession: ok = parse_pid(token, fields.session, true); break;
      case kFlags: ok = procfs::parse_whole_unsigned(token, fields.flags); break;
      case kUtime: ok = procfs::parse_whole_unsigned(token, fields.utime_ticks); break;
      case kStime: ok = procfs::parse_whole_unsigned(token, fields.stime_ticks); break;
      case kNumThreads: ok = take_signed(token, fields.num_threads) && token.empty(); break;
      case kStartTime: ok = procfs::parse_whole_unsigned(token, fields.start_time_ticks); break;
      case kRss: {
        std::int64_t pages = 0;
        ok = take_signed(token, pages) && token.empty();
        fields.rss_pages = pages > 0 ? static_cast<std::uint64_t>(pages) : 0;
        break;
      }
      default: break;  // fields not kept are not checked
    }
    if (!ok) return std::nullopt;
  }
  // The kernel writes more fields and a newline after rss; text ending right after it was
  // cut, possibly inside the number.
  if (rest.empty()) return std::nullopt;
  return fields;
}

std::optional<unsigned long> parse_fdinfo_flags(std::string_view text) {
  constexpr std::string_view kKey = "flags:";
  while (!text.empty()) {
    std::string_view line = procfs::take_line(text);
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    const std::string_view digits = procfs::take_token(line);
    unsigned long flags = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), flags, 8);
    if (digits.empty() || error != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
    return flags;
  }
  return std::nullopt;
}

std::optional<StatusFields> parse_status(std::string_view text) {
  StatusFields fields;
  bool have_uid = false;
  while (!text.empty()) {
    const std::string_view line = procfs::take_line(text);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    if (key == "Name") {
      // The kernel writes "Name:\t<comm>": only that tab goes, a name may begin with more.
      if (!value.empty() && value.front() == '\t') value.remove_prefix(1);
      fields.name = unescape_status_name(value);
    } else if (key == "Uid") {
      // real, effective, saved set, filesystem
      std::vector<uid_t> uids;
      if (!parse_number_list(value, uids) || uids.size() < 2) return std::nullopt;
      fields.real_uid = uids[0];
      fields.effective_uid = uids[1];
      fields.saved_uid = uids.size() > 2 ? uids[2] : uids[1];
      have_uid = true;
    } else if (key == "Gid") {
      std::vector<gid_t> gids;
      if (!parse_number_list(value, gids) || gids.size() < 2) return std::nullopt;
      fields.real_gid = gids[0];
      fields.effective_gid = gids[1];
    } else if (key == "Groups") {
      // A process may have no supplementary group: an empty list is no error.
      if (!parse_number_list(value, fields.groups) && value.find_first_not_of(" \t") != std::string_view::npos) {
        return std::nullopt;
      }
    } else if (key == "NSpid") {
      std::vector<pid_t> pids;
      if (!parse_number_list(value, pids)) return std::nullopt;
      for (const pid_t pid : pids) {
        if (pid <= 0) return std::nullopt;
      }
      fields.ns_pids = std::move(pids);
    }
  }
  if (!have_uid) return std::nullopt;
  return fields;
}

std::vector<std::string> parse_cmdline(std::string_view text) {
  std::vector<std::string> args;
  while (!text.empty()) {
    const std::size_t end = text.find('\0');
    args.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return args;
}

namespace {

// The name of `link_target` below dev_dir ("nvidia0", "dri/renderD128"), without the
// " (deleted)" a descriptor whose node was unlinked reads back with; nullopt outside dev_dir.
std::optional<std::string_view> name_under_dev_dir(std::string_view link_target, std::string_view dev_dir) {
  while (!dev_dir.empty() && dev_dir.back() == '/') dev_dir.remove_suffix(1);
  std::string_view name = link_target;
  if (name.size() <= dev_dir.size() || name.substr(0, dev_dir.size()) != dev_dir ||
      name[dev_dir.size()] != '/') {
    return std::nullopt;
  }
  name.remove_prefix(dev_dir.size() + 1);
  // A descriptor whose node was unlinked still refers to the driver's open file, so it still
  // pins GPU memory (e.g. a container runtime or nvidia-modprobe recreated /dev/nvidia0 while a
  // process kept the old node open). Count it; `path` keeps the suffix so the report shows the
  // node is gone.
  constexpr std::string_view kDeleted = " (deleted)";
  if (name.size() > kDeleted.size() && name.substr(name.size() - kDeleted.size()) == kDeleted) {
    name.remove_suffix(kDeleted.size());
  }
  return name;
}

}  // namespace

std::optional<DeviceFileHandle> classify_drm_path(std::string_view link_target, std::string_view dev_dir) {
  const auto name = name_under_dev_dir(link_target, dev_dir);
  if (!name) return std::nullopt;
  DeviceFileHandle handle;
  const auto take_minor = [&handle](std::string_view digits) {
    return !digits.empty() && digits.size() <= 4 && procfs::parse_whole_unsigned(digits, handle.minor);
  };
  constexpr std::string_view kCard = "dri/card";
  constexpr std::string_view kRender = "dri/renderD";
  if (*name == "kfd") {
    handle.kind = DeviceFileKind::Kfd;
  } else if (name->starts_with(kRender)) {
    handle.kind = DeviceFileKind::DrmRender;
    if (!take_minor(name->substr(kRender.size()))) return std::nullopt;
  } else if (name->starts_with(kCard)) {
    handle.kind = DeviceFileKind::DrmCard;
    if (!take_minor(name->substr(kCard.size()))) return std::nullopt;
  } else {
    return std::nullopt;
  }
  handle.path.assign(link_target);
  return handle;
}

std::optional<DeviceFileHandle> classify_device_path(std::string_view link_target,
                                                     std::string_view dev_dir) {
  const auto under = name_under_dev_dir(link_target, dev_dir);
  if (!under) return std::nullopt;
  const std::string_view name = *under;

  DeviceFileHandle handle;
  // "nvidia<N>" / "nvidia-cap<N>": N is 1..3 digits (minors are < 256; caps < 4096 today).
  const auto take_minor = [&handle](std::string_view digits) {
    if (digits.empty() || digits.size() > 4) return false;
    return procfs::parse_whole_unsigned(digits, handle.minor);
  };
  constexpr std::string_view kNvidia = "nvidia";
  constexpr std::string_view kCaps = "nvidia-caps/nvidia-cap";
  if (name == "nvidiactl") {
    handle.kind = DeviceFileKind::Control;
  } else if (name == "nvidia-uvm") {
    handle.kind = DeviceFileKind::Uvm;
  } else if (name == "nvidia-uvm-tools") {
    handle.kind = DeviceFileKind::UvmTools;
  } else if (name == "nvidia-modeset") {
    handle.kind = DeviceFileKind::Modeset;
  } else if (name.starts_with(kCaps)) {
    handle.kind = DeviceFileKind::Caps;
    if (!take_minor(name.substr(kCaps.size()))) return std::nullopt;
  } else if (name.starts_with(kNvidia)) {
    handle.kind = DeviceFileKind::Gpu;
    if (!take_minor(name.substr(kNvidia.size()))) return std::nullopt;
  } else {
    return std::nullopt;
  }
  handle.path.assign(link_target);
  return handle;
}

std::optional<DeviceFileHandle> classify_fd_link(std::string_view fd_name, std::string_view link_target,
                                                 std::string_view dev_dir) {
  std::optional<DeviceFileHandle> handle = classify_device_path(link_target, dev_dir);
  if (!handle) handle = classify_drm_path(link_target, dev_dir);
  if (handle && !procfs::parse_whole_unsigned(fd_name, handle->fd)) return std::nullopt;
  return handle;
}

}  // namespace gpureap
