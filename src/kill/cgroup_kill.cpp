#include "kill/cgroup_kill.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "proc/mountinfo.hpp"
#include "proc/parse_util.hpp"
#include "proc/pid_files.hpp"

namespace gpureap::cgroupfs {
namespace {

using Clock = std::chrono::steady_clock;

int write_at(int dirfd, const char* name, std::string_view text) {
  const procfs::unique_fd fd(::openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return errno;
  return procfs::write_all(fd.get(), text);
}

// cgroup.procs of dirfd and of every cgroup below it. False when one could not be read.
bool collect_pids(int dirfd, std::vector<pid_t>& out, int depth) {
  if (depth > 64) return false;
  procfs::ReadBuffer buffer;
  const auto text = buffer.read_file_at(dirfd, "cgroup.procs", 16u << 20);
  if (!text) return false;
  std::string_view rest = *text;
  for (std::string_view token = procfs::take_token(rest); !token.empty(); token = procfs::take_token(rest)) {
    pid_t pid = 0;
    if (!procfs::parse_whole_unsigned(token, pid) || pid <= 0) return false;
    out.push_back(pid);
  }
  std::vector<std::string> children;
  procfs::DirLister lister;
  if (!lister.for_each(dirfd, [&](const char* name, unsigned char type) {
        if (type == DT_DIR) children.emplace_back(name);
        return true;
      })) {
    return false;
  }
  for (const std::string& child : children) {
    const procfs::unique_fd fd = procfs::open_dir_at(dirfd, child.c_str(), true);
    if (!fd || !collect_pids(fd.get(), out, depth + 1)) return false;
  }
  return true;
}

bool events_say_frozen(int events_fd) {
  char buffer[512];
  const ssize_t got = ::pread(events_fd, buffer, sizeof buffer - 1, 0);
  if (got <= 0) return false;
  const std::string_view text(buffer, static_cast<std::size_t>(got));
  return text.find("frozen 1") != std::string_view::npos;
}

}  // namespace

std::optional<std::string> cgroup2_mount(const std::string& proc_root) {
  const procfs::unique_fd self = procfs::open_dir_at(AT_FDCWD, (proc_root + "/self").c_str(), false);
  if (!self) return std::nullopt;
  procfs::ReadBuffer buffer;
  const auto text = buffer.read_file_at(self.get(), "mountinfo");
  if (!text) return std::nullopt;
  for (const MountEntry& mount : parse_mountinfo(*text)) {
    if (mount.fs_type == "cgroup2" && mount.root == "/") return mount.mount_point;
  }
  return std::nullopt;
}

std::optional<std::string> own_cgroup_dir(const std::string& proc_root, pid_t pid) {
  const auto path = procfs::read_cgroup_v2_path(proc_root, pid);
  if (!path || path->empty() || *path == "/" || path->find("..") != std::string::npos) return std::nullopt;
  const auto mount = cgroup2_mount(proc_root);
  if (!mount) return std::nullopt;
  std::string dir = *mount + *path;
  if (::access((dir + "/cgroup.kill").c_str(), W_OK) != 0) return std::nullopt;
  if (::access((dir + "/cgroup.freeze").c_str(), W_OK) != 0) return std::nullopt;
  return dir;
}

std::optional<std::vector<pid_t>> read_subtree_pids(const std::string& cgroup_dir) {
  const procfs::unique_fd dir = procfs::open_dir_at(AT_FDCWD, cgroup_dir.c_str(), true);
  std::vector<pid_t> pids;
  if (!dir || !collect_pids(dir.get(), pids, 0)) return std::nullopt;
  return pids;
}

std::vector<pid_t> cgroup_subtree_pids(const std::string& cgroup_dir) {
  return read_subtree_pids(cgroup_dir).value_or(std::vector<pid_t>{});
}

int write_cgroup_kill(const std::string& cgroup_dir) {
  const procfs::unique_fd dir = procfs::open_dir_at(AT_FDCWD, cgroup_dir.c_str(), true);
  if (!dir) return errno;
  return write_at(dir.get(), "cgroup.kill", "1");
}

std::optional<CgroupDir> CgroupDir::open(const std::string& path, std::chrono::milliseconds lock_bound) {
  procfs::unique_fd fd = procfs::open_dir_at(AT_FDCWD, path.c_str(), true);
  if (!fd) return std::nullopt;
  // Two gpureaps on one cgroup (watch and an epilog's reap) take turns: the second waits for
  // the first to be done, at most lock_bound, and otherwise leaves the cgroup alone.
  const auto deadline = Clock::now() + lock_bound;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) break;  // no locking here: nothing to share it with
    if (Clock::now() >= deadline) return std::nullopt;
    ::poll(nullptr, 0, 10);
  }
  CgroupDir dir;
  dir.path_ = path;
  dir.dir_ = std::move(fd);
  return dir;
}

std::optional<std::vector<pid_t>> CgroupDir::member_pids() const {
  std::vector<pid_t> pids;
  if (!collect_pids(dir_.get(), pids, 0)) return std::nullopt;
  return pids;
}

bool CgroupDir::freeze(std::chrono::milliseconds bound) {
  if (frozen_) return true;
  // A freeze someone else made is theirs to undo: never taken over, never thawed by us.
  if (frozen_by_someone_else()) return false;
  const procfs::unique_fd events(::openat(dir_.get(), "cgroup.events", O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!events || write_at(dir_.get(), "cgroup.freeze", "1") != 0) return false;
  frozen_ = true;
  const auto deadline = Clock::now() + bound;
  // cgroup.events signals a change with POLLPRI; the state is read again after each wake-up.
  while (!events_say_frozen(events.get())) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      thaw();
      return false;
    }
    pollfd entry{events.get(), POLLPRI, 0};
    ::poll(&entry, 1, static_cast<int>(std::min<long long>(left, 10)));
  }
  return true;
}

void CgroupDir::thaw() noexcept {
  if (!frozen_) return;
  if (write_at(dir_.get(), "cgroup.freeze", "0") == 0) frozen_ = false;
}

bool CgroupDir::frozen_by_someone_else() const {
  if (frozen_) return false;
  const procfs::unique_fd file(::openat(dir_.get(), "cgroup.freeze", O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!file) return true;  // unreadable: assume it is not ours to touch
  char value = '?';
  if (::read(file.get(), &value, 1) != 1) return true;
  return value != '0';
}

int CgroupDir::kill() const { return write_at(dir_.get(), "cgroup.kill", "1"); }

}  // namespace gpureap::cgroupfs
