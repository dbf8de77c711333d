// What is safe to read about a process stuck in the kernel, and what is not.
// Safe: stat, status, wchan, sched, mountinfo, task/<tid>/{stat,wchan}, and readlink of
// fd/<n>, cwd, root and exe: the kernel answers from its own task and file structures
// (d_path walks the dentry cache; it never calls into the filesystem).
// Never read here: cmdline, environ, maps, smaps, map_files, mem. They take the process's
// mm lock, which a process stuck in a page fault on NFS holds or is queued for, so our read
// would hang with it. Files it has only mmap()ed are therefore not seen.
// Never touched: the paths it has open or works in. A stat() of a path on a dead NFS server
// puts gpureap in D too.
#include "doctor/blocked_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <fcntl.h>

#include "proc/pid_files.hpp"
#include "proc/mountinfo.hpp"
#include "proc/parse_util.hpp"
#include "proc/proc_io.hpp"
#include "proc/proc_parse.hpp"

namespace gpureap {
namespace {

using procfs::unique_fd;
using procfs::ReadBuffer;

constexpr std::string_view kDeleted = " (deleted)";
constexpr std::size_t kMaxThreads = 4096;  // bounds the cost on huge thread pools
constexpr std::string_view kAsRoot = ": run gpureap as root to see which mounts it waits on";

constexpr std::string_view kNetworkFilesystems[] = {
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "coda", "9p", "ceph",
    "glusterfs", "lustre", "gpfs", "beegfs", "fhgfs", "orangefs", "pvfs2", "panfs",
    "wekafs", "davfs", "ocfs2", "gfs2",
    "fuse.glusterfs", "fuse.sshfs", "fuse.s3fs", "fuse.ceph", "fuse.ceph-fuse",
    "fuse.rclone", "fuse.gcsfuse", "fuse.goofys", "fuse.juicefs", "fuse.mountpoint-s3",
    "fuse.blobfuse", "fuse.blobfuse2", "fuse.alluxio-fuse", "fuse.mfs", "fuse.quobyte",
    "fuse.seaweedfs", "fuse.davfs"};

// The one mountinfo parser (src/proc), plus doctor's question: is it a network filesystem?
std::optional<MountRef> mount_ref_from_line(std::string_view line) {
  auto entry = parse_mountinfo_line(line);
  if (!entry) return std::nullopt;
  MountRef mount;
  mount.mount_point = std::move(entry->mount_point);
  mount.fs_type = std::move(entry->fs_type);
  mount.source = std::move(entry->source);
  mount.network = is_network_filesystem(mount.fs_type);
  return mount;
}

std::vector<MountRef> parse_mounts(std::string_view text) {
  std::vector<MountRef> mounts;
  while (!text.empty()) {
    auto mount = mount_ref_from_line(procfs::take_line(text));
    if (mount) mounts.push_back(std::move(*mount));
  }
  return mounts;
}

bool holds(std::string_view mount_point, std::string_view path) {
  if (mount_point == "/") return true;
  return path.size() >= mount_point.size() && path.substr(0, mount_point.size()) == mount_point &&
         (path.size() == mount_point.size() || path[mount_point.size()] == '/');
}

const MountRef* match_mount(const std::vector<MountRef>& mounts, std::string_view path) {
  if (path.size() > kDeleted.size() && path.substr(path.size() - kDeleted.size()) == kDeleted) {
    path.remove_suffix(kDeleted.size());
  }
  if (path.empty() || path.front() != '/') return nullptr;
  const MountRef* best = nullptr;
  for (const MountRef& mount : mounts) {  // ">=": a later mount at the same point is on top
    if (holds(mount.mount_point, path) &&
        (best == nullptr || mount.mount_point.size() >= best->mount_point.size())) {
      best = &mount;
    }
  }
  return best;
}

// The values of the lines "<key> : <ms>.<6 digits>" (the scheduler's SPLIT_NS format) as
// integer nanoseconds, exact after weeks of uptime. A leading '.' of the key is dropped:
// sched_debug prints "  .clock                         : 12.000345".
std::vector<std::uint64_t> sched_values(std::string_view text, std::string_view key_a,
                                        std::string_view key_b) {
  std::vector<std::uint64_t> values;
  while (!text.empty()) {
    const std::string_view line = procfs::take_line(text);
    const std::size_t colon = line.find(':');
    std::string_view key = line.substr(0, colon), value = line.substr(colon + 1);
    key = procfs::take_token(key);
    if (!key.empty() && key.front() == '.') key.remove_prefix(1);
    if (colon == std::string_view::npos || (key != key_a && key != key_b)) continue;
    value = procfs::take_token(value);
    std::uint64_t ms = 0, ns = 0;
    if (procfs::take_unsigned(value, ms) && value.size() == 7 && value.front() == '.' &&
        procfs::parse_whole_unsigned(value.substr(1), ns)) {
      values.push_back(ms * 1000000 + ns);
    }
  }
  return values;
}

std::optional<std::uint64_t> block_start_ns(std::string_view sched_text) {
  const auto values = sched_values(sched_text, "block_start", "se.statistics.block_start");
  if (values.empty() || values.front() == 0) return std::nullopt;  // 0: not in D, or unset
  return values.front();
}

std::optional<std::uint64_t> context_switches_from(std::string_view status) {
  std::optional<std::uint64_t> voluntary, involuntary;
  while (!status.empty()) {
    std::string_view line = procfs::take_line(status);
    const std::string_view key = procfs::take_token(line);
    procfs::skip_spaces(line);
    std::uint64_t number = 0;
    if (!procfs::take_unsigned(line, number)) continue;
    if (key == "voluntary_ctxt_switches:") voluntary = number;
    if (key == "nonvoluntary_ctxt_switches:") involuntary = number;
  }
  if (!voluntary || !involuntary) return std::nullopt;
  return *voluntary + *involuntary;
}

std::string first_lines(std::string_view text, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count && !text.empty(); ++i) {
    if (!out.empty()) out.push_back('\n');
    out.append(procfs::take_line(text));
  }
  return out;
}

double monotonic_seconds() {
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

unique_fd open_pid_dir(const std::string& proc_root, int pid) {
  const unique_fd root = procfs::open_dir_at(AT_FDCWD, proc_root.c_str(), false);
  if (!root) return unique_fd();
  // O_NOFOLLOW: a fixture or a hostile tree cannot redirect us; the fd binds one process.
  return procfs::open_dir_at(root.get(), std::to_string(pid).c_str(), true);
}

// Reads one process through its directory fd; the first failure becomes details.error.
class Inspector {
 public:
  Inspector(const std::string& proc_root, int dir_fd, BlockedIoDetails& details)
      : proc_root_(proc_root), dir_(dir_fd), details_(details) {}
  void run();

 private:
  // "<what> of PID <pid> (<errno text>)<consequence>". errno is saved first. ENOENT or
  // ESRCH means "gone" only if stat, read through the same fd, fails too.
  void fail(std::string_view what, std::string_view consequence) {
    const int err = errno;
    if (details_.error) return;
    const std::string pid = std::to_string(details_.pid);
    if ((err == ENOENT || err == ESRCH) && !buffer_.read_proc_file_at(dir_, "stat")) {
      details_.error = "PID " + pid + " exited while being inspected";
    } else {
      details_.error = std::string(what) + " of PID " + pid + " (" + std::strerror(err) + ")" +
                       std::string(consequence);
    }
  }
  std::string read_wchan(int dir) {  // "" for "0": hidden, or the task was running
    std::string_view text = buffer_.read_file_at(dir, "wchan", 512).value_or(std::string_view());
    const std::string_view symbol = procfs::take_token(text);
    return symbol == "0" ? std::string() : std::string(symbol);
  }
  void read_threads();
  void read_blocked_time();
  void read_files();
  void add_file(std::string path, std::string what, bool listed);

  const std::string& proc_root_;
  int dir_;
  BlockedIoDetails& details_;
  ReadBuffer buffer_;
  std::vector<MountRef> mounts_;
};

void Inspector::run() {
  const auto stat_text = buffer_.read_proc_file_at(dir_, "stat");
  if (!stat_text) return fail("cannot read the stat file", "");
  const std::optional<StatFields> stat = parse_stat(*stat_text);
  if (!stat || stat->pid != details_.pid) {
    details_.error = "the stat file of PID " + std::to_string(details_.pid) + " is not understood";
    return;
  }
  details_.state = stat->state;
  details_.start_time_ticks = stat->start_time_ticks;
  if (const auto text = buffer_.read_proc_file_at(dir_, "status")) {
    details_.context_switches = context_switches_from(*text);
  }
  details_.wchan = read_wchan(dir_);
  read_threads();
  read_blocked_time();
  if (const auto text = buffer_.read_file_at(dir_, "mountinfo")) {
    mounts_ = parse_mounts(*text);
  } else {
    fail("cannot read the mount table", ": its files are shown without their mounts");
  }
  read_files();
  const auto stack = procfs::kernel_stack_read_cannot_block() ? buffer_.read_file_at(dir_, "stack", 64 * 1024)
                                                : std::nullopt;
  if (stack) details_.kernel_stack = first_lines(*stack, kMaxKernelStackLines);
}

void Inspector::read_threads() {
  const unique_fd tasks = procfs::open_dir_at(dir_, "task", false);
  if (!tasks) return;
  std::vector<int> tids;
  procfs::DirLister().for_each(tasks.get(), [&tids](const char* name, unsigned char) {
    int tid = 0;
    if (procfs::parse_pid_name(name, tid)) tids.push_back(tid);
    return tids.size() < kMaxThreads;
  });
  std::sort(tids.begin(), tids.end());
  for (const int tid : tids) {
    const unique_fd task = procfs::open_dir_at(tasks.get(), std::to_string(tid).c_str(), true);
    if (!task) continue;  // exited since the listing
    const auto text = buffer_.read_proc_file_at(task.get(), "stat");
    const std::optional<StatFields> stat = text ? parse_stat(*text) : std::nullopt;
    if (!stat || stat->state != 'D') continue;
    details_.blocked_threads.push_back({tid, read_wchan(task.get())});
  }
}

void Inspector::read_blocked_time() {
  const auto sched = buffer_.read_file_at(dir_, "sched", 64 * 1024);
  if (!sched) return;  // no CONFIG_SCHED_DEBUG
  const std::string sched_text(*sched);
  if (!block_start_ns(sched_text)) return;  // schedstats off: nothing to compare
  // The runqueue clocks: /proc/sched_debug before Linux 5.13, debugfs since.
  std::vector<std::string> sources = {proc_root_ + "/sched_debug"};
  if (proc_root_ == "/proc" || proc_root_ == "/proc/") {
    sources.emplace_back("/sys/kernel/debug/sched/debug");
  }
  for (const std::string& source : sources) {
    if (const auto text = buffer_.read_file_at(AT_FDCWD, source.c_str())) {
      details_.blocked_since_seconds = blocked_seconds_from(sched_text, *text);
      if (details_.blocked_since_seconds) return;
    }
  }
}

void Inspector::read_files() {
  for (const char* link : {"cwd", "root", "exe"}) {
    const auto target = buffer_.read_link_at(dir_, link);
    if (!target && procfs::errno_means_denied()) return fail("cannot read the open files", kAsRoot);
    if (!target) continue;  // a kernel thread has no exe
    if (std::string_view(link) == "root" && *target == "/") continue;
    add_file(std::string(*target), link, true);
  }
  const unique_fd fd_dir = procfs::open_dir_at(dir_, "fd", false);
  if (!fd_dir) return fail("cannot read the open files", kAsRoot);
  std::vector<int> fds;
  auto collect = [&fds](const char* name, unsigned char) {
    int fd = 0;
    if (procfs::parse_whole_unsigned(std::string_view(name), fd)) fds.push_back(fd);
    return true;
  };
  const bool listed = procfs::DirLister().for_each(fd_dir.get(), collect);
  if (!listed) fail("cannot read the open files", kAsRoot);
  std::sort(fds.begin(), fds.end());
  std::size_t shown = 0;
  for (const int fd : fds) {
    const auto target = buffer_.read_link_at(fd_dir.get(), std::to_string(fd).c_str());
    if (!target && procfs::errno_means_denied()) return fail("cannot read the open files", kAsRoot);
    if (!target || target->empty() || target->front() != '/') continue;  // closed, socket, pipe
    const bool listed_file = shown < kMaxBlockedFiles;
    if (listed_file) ++shown; else ++details_.files_omitted;
    add_file(std::string(*target), "fd " + std::to_string(fd), listed_file);
  }
}

void Inspector::add_file(std::string path, std::string what, bool listed) {
  const MountRef* mount = mounts_.empty() ? nullptr : match_mount(mounts_, path);
  if (mount != nullptr && mount->network) {
    auto& network = details_.network_mounts;
    const bool known = std::any_of(network.begin(), network.end(), [mount](const MountRef& m) {
      return m.mount_point == mount->mount_point && m.source == mount->source &&
             m.fs_type == mount->fs_type;
    });
    if (!known) network.push_back(*mount);
  }
  if (!listed) return;
  BlockedFile file{std::move(path), std::move(what), std::nullopt};
  if (mount != nullptr) file.mount = *mount;
  details_.files.push_back(std::move(file));
}

}  // namespace

bool is_network_filesystem(std::string_view fs_type) {
  return std::ranges::count(kNetworkFilesystems, fs_type) > 0;
}

std::optional<MountRef> mount_for_path(std::string_view mountinfo_text, std::string_view path) {
  const std::vector<MountRef> mounts = parse_mounts(mountinfo_text);
  const MountRef* mount = match_mount(mounts, path);
  return mount ? std::optional<MountRef>(*mount) : std::nullopt;
}

std::optional<double> blocked_seconds_from(std::string_view sched_text,
                                           std::string_view sched_debug_text) {
  const auto start = block_start_ns(sched_text);
  // The latest per-CPU clock: CPUs idle under NOHZ show stale ones.
  const auto clocks = sched_values(sched_debug_text, "clock", "clock");
  if (!start || clocks.empty()) return std::nullopt;
  const std::uint64_t now = *std::max_element(clocks.begin(), clocks.end());
  return now > *start ? static_cast<double>(now - *start) / 1e9 : 0.0;
}

BlockedIoDetails inspect_blocked_process(const std::string& proc_root, int pid) {
  BlockedIoDetails details;
  details.pid = pid;
  const unique_fd dir = open_pid_dir(proc_root, pid);
  if (!dir) {
    details.error = procfs::errno_means_gone()
                        ? "PID " + std::to_string(pid) + " is gone"
                        : "cannot open " + proc_root + "/" + std::to_string(pid) + ": " +
                              std::strerror(errno);
    return details;
  }
  Inspector(proc_root, dir.get(), details).run();
  return details;
}

std::optional<BlockedSample> sample_blocked(const std::string& proc_root, int pid) {
  const unique_fd dir = open_pid_dir(proc_root, pid);
  if (!dir) return std::nullopt;
  ReadBuffer buffer;
  const auto text = buffer.read_proc_file_at(dir.get(), "stat");
  const std::optional<StatFields> stat = text ? parse_stat(*text) : std::nullopt;
  if (!stat || stat->pid != pid) return std::nullopt;
  BlockedSample sample;
  sample.pid = pid;
  sample.start_time_ticks = stat->start_time_ticks;
  sample.state = stat->state;
  if (const auto status = buffer.read_proc_file_at(dir.get(), "status")) {
    sample.context_switches = context_switches_from(*status);
  }
  sample.taken_at_monotonic = monotonic_seconds();
  return sample;
}

bool stayed_blocked(const BlockedSample& first, const BlockedSample& second) {
  return first.pid == second.pid && first.pid > 0 &&
         first.start_time_ticks == second.start_time_ticks && first.state == 'D' &&
         second.state == 'D' && first.context_switches && second.context_switches &&
         *first.context_switches == *second.context_switches &&
         second.taken_at_monotonic >= first.taken_at_monotonic;
}

}  // namespace gpureap
