#include "proc/pid_files.hpp"

#include <sys/utsname.h>

#include <cstdio>

#include <fcntl.h>

#include <string_view>

#include "proc/parse_util.hpp"
#include "proc/proc_io.hpp"
#include "proc/proc_parse.hpp"

namespace gpureap::procfs {
namespace {

unique_fd open_pid_dir(const std::string& proc_root, pid_t pid) {
  const std::string path = proc_root + "/" + std::to_string(pid);
  return open_dir_at(AT_FDCWD, path.c_str(), true);
}

std::optional<StatFields> stat_at(int pid_dir, ReadBuffer& buffer) {
  const auto text = buffer.read_proc_file_at(pid_dir, "stat");
  if (!text) return std::nullopt;
  return parse_stat(*text);
}

void append_pids(std::string_view text, std::vector<pid_t>& out) {
  for (;;) {
    const std::string_view token = take_token(text);
    if (token.empty()) return;
    pid_t pid = 0;
    if (parse_whole_unsigned(token, pid) && pid > 0) out.push_back(pid);
  }
}

}  // namespace

std::optional<StatFields> read_stat(const std::string& proc_root, pid_t pid) {
  const unique_fd dir = open_pid_dir(proc_root, pid);
  if (!dir) return std::nullopt;
  ReadBuffer buffer(1024);
  return stat_at(dir.get(), buffer);
}

std::optional<StatusFields> read_status(const std::string& proc_root, pid_t pid) {
  const unique_fd dir = open_pid_dir(proc_root, pid);
  if (!dir) return std::nullopt;
  ReadBuffer buffer;
  const auto text = buffer.read_proc_file_at(dir.get(), "status");
  if (!text) return std::nullopt;
  return parse_status(*text);
}

std::string read_wchan(const std::string& proc_root, pid_t pid) {
  const unique_fd dir = open_pid_dir(proc_root, pid);
  if (!dir) return "";
  ReadBuffer buffer(256);
  auto text = buffer.read_file_at(dir.get(), "wchan", 256);
  if (!text || *text == "0") return "";
  while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->remove_suffix(1);
  return std::string(*text);
}

bool kernel_stack_read_cannot_block() {
  struct utsname name {};
  unsigned major = 0, minor = 0;
  if (::uname(&name) != 0 || std::sscanf(name.release, "%u.%u", &major, &minor) != 2) return false;
  return major > 5 || (major == 5 && minor >= 7);
}

std::optional<std::string> read_kernel_stack(const std::string& proc_root, pid_t pid) {
  if (!kernel_stack_read_cannot_block()) return std::nullopt;
  const unique_fd dir = open_pid_dir(proc_root, pid);
  if (!dir) return std::nullopt;
  ReadBuffer buffer;
  const auto text = buffer.read_file_at(dir.get(), "stack", 64 * 1024);
  if (!text) return std::nullopt;
  return std::string(*text);
}

std::optional<std::string> read_cgroup_v2_path(const std::string& proc_root, pid_t pid) {
  const unique_fd dir = open_pid_dir(proc_root, pid);
  if (!dir) return std::nullopt;
  ReadBuffer buffer;
  auto text = buffer.read_file_at(dir.get(), "cgroup", 64u << 10);
  if (!text) return std::nullopt;
  std::optional<std::string> path;
  std::string_view rest = *text;
  while (!rest.empty()) {
    const std::string_view line = take_line(rest);
    if (line.substr(0, 3) == "0::") path = std::string(line.substr(3));
  }
  return path;
}

std::optional<std::vector<pid_t>> read_children(const std::string& proc_root, pid_t pid) {
  const unique_fd dir = open_pid_dir(proc_root, pid);
  if (!dir) return std::nullopt;
  const unique_fd task_dir = open_dir_at(dir.get(), "task", true);
  if (!task_dir) return std::nullopt;
  std::vector<pid_t> tids;
  DirLister lister;
  lister.for_each(task_dir.get(), [&](const char* name, unsigned char) {
    pid_t tid = 0;
    if (parse_pid_name(name, tid)) tids.push_back(tid);
    return true;
  });
  std::vector<pid_t> children;
  bool any = false;
  ReadBuffer buffer;
  for (const pid_t tid : tids) {
    const unique_fd thread = open_dir_at(task_dir.get(), std::to_string(tid).c_str(), true);
    if (!thread) continue;  // the thread exited meanwhile
    const auto text = buffer.read_file_at(thread.get(), "children", 1u << 20);
    if (!text) continue;  // no CONFIG_PROC_CHILDREN
    any = true;
    append_pids(*text, children);
  }
  if (!any) return std::nullopt;
  return children;
}

std::vector<StatFields> scan_stats(const std::string& proc_root) {
  std::vector<StatFields> out;
  const unique_fd root = open_dir_at(AT_FDCWD, proc_root.c_str(), false);
  if (!root) return out;
  std::vector<pid_t> pids;
  DirLister lister;
  lister.for_each(root.get(), [&](const char* name, unsigned char) {
    pid_t pid = 0;
    if (parse_pid_name(name, pid)) pids.push_back(pid);
    return true;
  }, true);
  out.reserve(pids.size());
  ReadBuffer buffer(1024);
  for (const pid_t pid : pids) {
    const unique_fd dir = open_dir_at(root.get(), std::to_string(pid).c_str(), true);
    if (!dir) continue;
    if (auto stat = stat_at(dir.get(), buffer)) out.push_back(std::move(*stat));
  }
  return out;
}

}  // namespace gpureap::procfs
