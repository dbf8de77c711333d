#include "proc/task_state.hpp"

#include <charconv>
#include <string_view>

#include "proc/parse_util.hpp"
#include "proc/proc_io.hpp"
#include "proc/proc_parse.hpp"

namespace gpureap::procfs {

bool address_space_may_block(int pid_dir, pid_t pid, char main_state, std::int64_t threads,
                             ReadBuffer& buffer, DirLister& lister) {
  if (main_state == 'D') return true;
  if (threads == 1) return false;
  const unique_fd tasks = open_dir_at(pid_dir, "task", false);
  if (!tasks) return !errno_means_gone();  // gone: nothing to read anyway
  bool blocked = false;
  const bool listed = lister.for_each(tasks.get(), [&](const char* name, unsigned char) {
    int tid = 0;
    if (!parse_pid_name(name, tid) || tid == pid) return true;
    char path[32];  // "<tid>/stat": one open instead of the task's directory and its stat
    const auto end = std::to_chars(path, path + 16, tid).ptr;
    std::string_view("/stat").copy(end, 5);
    end[5] = '\0';
    const auto text = buffer.read_proc_file_at(tasks.get(), path);
    if (!text) return true;  // exited since the listing
    const auto stat = parse_stat(*text);
    if (stat && stat->state == 'D') blocked = true;
    return !blocked;
  });
  return blocked || (!listed && !errno_means_gone());
}

}  // namespace gpureap::procfs
