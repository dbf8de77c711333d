#include "kill/proc_peek.hpp"

#include <cerrno>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

#include "proc/parse_util.hpp"
#include "proc/proc_io.hpp"
#include "proc/proc_parse.hpp"

namespace gpureap::killproc {
namespace {

std::optional<std::string> read_small_file(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return std::nullopt;
  const procfs::Fd owner(fd);
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    if (got == 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
    if (text.size() > (1u << 20)) break;
  }
  return text;
}

std::string pid_dir(const std::string& proc_root, pid_t pid) {
  return proc_root + "/" + std::to_string(pid);
}

void append_pids(std::string_view text, std::vector<pid_t>& out) {
  for (;;) {
    const std::string_view token = procfs::take_token(text);
    if (token.empty()) return;
    pid_t pid = 0;
    if (procfs::parse_whole_unsigned(token, pid) && pid > 0) out.push_back(pid);
  }
}

}  // namespace

std::optional<StatFields> read_stat(const std::string& proc_root, pid_t pid) {
  const auto text = read_small_file(pid_dir(proc_root, pid) + "/stat");
  if (!text) return std::nullopt;
  return parse_stat(*text);
}

std::optional<uid_t> read_owner_uid(const std::string& proc_root, pid_t pid) {
  const auto text = read_small_file(pid_dir(proc_root, pid) + "/status");
  if (!text) return std::nullopt;
  const auto status = parse_status(*text);
  if (!status) return std::nullopt;
  return status->effective_uid;
}

std::string read_wchan(const std::string& proc_root, pid_t pid) {
  auto text = read_small_file(pid_dir(proc_root, pid) + "/wchan");
  if (!text || *text == "0") return "";
  while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
  return *text;
}

std::optional<std::vector<pid_t>> read_children(const std::string& proc_root, pid_t pid) {
  const std::string task_dir = pid_dir(proc_root, pid) + "/task";
  const procfs::Fd dir = procfs::open_dir_at(AT_FDCWD, task_dir.c_str(), true);
  if (!dir) return std::nullopt;
  std::vector<pid_t> tids;
  procfs::DirLister lister;
  lister.for_each(dir.get(), [&](const char* name, unsigned char) {
    pid_t tid = 0;
    if (procfs::parse_pid_name(name, tid)) tids.push_back(tid);
    return true;
  });
  std::vector<pid_t> children;
  bool any = false;
  for (const pid_t tid : tids) {
    const auto text = read_small_file(task_dir + "/" + std::to_string(tid) + "/children");
    if (!text) continue;  // the thread exited meanwhile, or no CONFIG_PROC_CHILDREN
    any = true;
    append_pids(*text, children);
  }
  if (!any) return std::nullopt;
  return children;
}

std::vector<StatFields> scan_stats(const std::string& proc_root) {
  std::vector<StatFields> out;
  const procfs::Fd dir = procfs::open_dir_at(AT_FDCWD, proc_root.c_str(), false);
  if (!dir) return out;
  std::vector<pid_t> pids;
  procfs::DirLister lister;
  lister.for_each(dir.get(), [&](const char* name, unsigned char) {
    pid_t pid = 0;
    if (procfs::parse_pid_name(name, pid)) pids.push_back(pid);
    return true;
  }, true);
  out.reserve(pids.size());
  for (const pid_t pid : pids) {
    if (auto stat = read_stat(proc_root, pid)) out.push_back(std::move(*stat));
  }
  return out;
}

}  // namespace gpureap::killproc
