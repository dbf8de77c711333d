#include "proc/kept_stat_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "proc/proc_parse.hpp"

namespace gpureap::procfs {

KeptStatFiles::KeptStatFiles(std::string proc_root, std::size_t max_open)
    : proc_root_(std::move(proc_root)), max_open_(max_open) {}

// One pread from the start: procfs makes the file anew for a read at offset 0.
std::optional<StatFields> KeptStatFiles::read_file(int fd, pid_t pid, std::uint64_t start_time_ticks) {
  char text[4096];
  ssize_t n = -1;
  do {
    n = ::pread(fd, text, sizeof text, 0);
  } while (n < 0 && errno == EINTR);
  // A stat is far shorter than the buffer: one that fills it is not one to trust.
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof text) return std::nullopt;
  std::optional<StatFields> stat = parse_stat(std::string_view(text, static_cast<std::size_t>(n)));
  if (!stat || stat->pid != pid || stat->start_time_ticks != start_time_ticks) return std::nullopt;
  return stat;
}

std::optional<StatFields> KeptStatFiles::read(pid_t pid, std::uint64_t start_time_ticks) {
  if (const auto it = kept_.find(pid); it != kept_.end()) {
    if (it->second.start_time_ticks == start_time_ticks) {
      it->second.read = true;
      if (auto stat = read_file(it->second.file.get(), pid, start_time_ticks)) return stat;
      kept_.erase(it);  // reaped: the file stays the old process's
      return std::nullopt;
    }
    kept_.erase(it);  // asked about another process under that PID
  }
  const std::string path = proc_root_ + "/" + std::to_string(pid) + "/stat";
  unique_fd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) return std::nullopt;
  std::optional<StatFields> stat = read_file(file.get(), pid, start_time_ticks);
  if (stat && kept_.size() < max_open_) kept_.emplace(pid, Kept{std::move(file), start_time_ticks, true});
  return stat;
}

void KeptStatFiles::close_unread() {
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (!it->second.read) {
      it = kept_.erase(it);
      continue;
    }
    it->second.read = false;
    ++it;
  }
}

}  // namespace gpureap::procfs
