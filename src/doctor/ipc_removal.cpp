// Removing one leftover after looking again, and the looks themselves: semctl for semaphore
// sets, and every process's fd links and maps for POSIX files.
#include "doctor/ipc_removal.hpp"

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include <fcntl.h>
#include <signal.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fmt/format.h>

#include "proc/parse_util.hpp"
#include "proc/proc_io.hpp"
#include "proc/proc_parse.hpp"
#include "proc/task_state.hpp"

namespace gpureap {
namespace {

using procfs::unique_fd;

// What looking at one process (or one of its tasks) found out: all of it, or why not.
enum class Inspection { Inspected, Gone, Denied, Blocked };

// Marks which of a few files some process holds open (fd links) or mapped (maps lines carry
// "major:minor inode", so no stat is needed). Only a link whose last path component is one
// of the names is stat()ed: stat through the link reaches the file's filesystem, which may
// be a hung network mount.
class OpenFileFinder {
 public:
  explicit OpenFileFinder(const std::vector<FileIdentity>& files) : in_use_(files.size(), false) {
    for (std::size_t i = 0; i < files.size(); ++i) {
      by_id_[{files[i].device, files[i].inode}] = i;
      by_name_[files[i].name] = i;
    }
  }

  OpenFileScan run(const std::string& proc_root) {
    OpenFileScan scan;
    const unique_fd root = procfs::open_dir_at(AT_FDCWD, proc_root.c_str(), false);
    std::vector<int> pids;
    const bool listed = root && lister_.for_each(root.get(), [&pids](const char* name, unsigned char) {
      int pid = 0;
      if (procfs::parse_pid_name(name, pid)) pids.push_back(pid);
      return true;
    });
    if (!listed) {  // without the process list nothing can be called unused
      scan.errors.push_back(fmt::format("cannot list processes in {}: {}; no POSIX object is "
                                        "reported as unused", proc_root, std::strerror(errno)));
      scan.in_use.assign(in_use_.size(), true);
      return scan;
    }
    for (const int pid : pids) {
      const unique_fd pid_dir = procfs::open_dir_at(root.get(), fmt::format_int(pid).c_str(), true);
      const Inspection look = pid_dir ? inspect_process(pid_dir.get(), pid)
                                : (procfs::errno_means_denied() ? Inspection::Denied : Inspection::Gone);
      if (look == Inspection::Denied && !procfs::denial_hides_nothing(pid)) ++scan.processes_not_inspected;
      if (look == Inspection::Blocked) {
        ++scan.processes_not_inspected;
        scan.blocked_pids.push_back(pid);
      }
    }
    if (!scan.blocked_pids.empty()) {
      std::string blocked;
      for (const int pid : scan.blocked_pids) blocked += (blocked.empty() ? "" : ", ") + std::to_string(pid);
      scan.errors.push_back(fmt::format(
          "PID {} in uninterruptible sleep (D): its open files and memory maps were not read (that can "
          "hang); a shared memory file it holds would look unused, so none is removed while it is",
          blocked));
    }
    if (scan.processes_not_inspected != 0) {
      scan.errors.push_back(fmt::format(
          "could not read the open files or memory maps of {} process(es) in {}: permission "
          "denied; run as root for a complete answer", scan.processes_not_inspected, proc_root));
    }
    scan.in_use = std::move(in_use_);
    return scan;
  }

 private:
  Inspection inspect_process(int pid_dir, int pid) {
    // The state just before: maps of a process with a thread in D are never read.
    const auto stat_text = buffer_.read_proc_file_at(pid_dir, "stat");
    if (!stat_text) return procfs::errno_means_denied() ? Inspection::Denied : Inspection::Gone;
    const auto stat = parse_stat(*stat_text);
    if (!stat) return Inspection::Denied;  // not understood: cannot call it harmless
    if (procfs::address_space_may_block(pid_dir, stat->pid, stat->state, stat->num_threads, buffer_, lister_)) return Inspection::Blocked;
    bool saw_any = false;
    const Inspection look = inspect_task(pid_dir, saw_any);
    if (look != Inspection::Inspected || saw_any) return look;
    // Nothing at all: a kernel thread, or a leader that exited while its other threads
    // live on with the files and memory, which only task/<tid>/ shows.
    const unique_fd tasks = procfs::open_dir_at(pid_dir, "task", false);
    if (!tasks) return procfs::errno_means_denied() ? Inspection::Denied : Inspection::Gone;
    std::vector<int> tids;
    lister_.for_each(tasks.get(), [&](const char* name, unsigned char) {
      int tid = 0;
      if (procfs::parse_pid_name(name, tid) && tid != pid) tids.push_back(tid);
      return true;
    });
    for (const int tid : tids) {
      const unique_fd task = procfs::open_dir_at(tasks.get(), fmt::format_int(tid).c_str(), true);
      if (!task) {
        if (procfs::errno_means_denied()) return Inspection::Denied;
        continue;
      }
      if (inspect_task(task.get(), saw_any) == Inspection::Denied) return Inspection::Denied;
    }
    return Inspection::Inspected;
  }

  Inspection inspect_task(int task_dir, bool& saw_any) {
    const Inspection fds = look_at_fds(task_dir, saw_any);
    if (fds == Inspection::Denied) return fds;
    const Inspection maps = look_at_maps(task_dir, saw_any);
    if (maps == Inspection::Denied) return maps;
    return fds == Inspection::Gone && maps == Inspection::Gone ? Inspection::Gone : Inspection::Inspected;
  }

  Inspection look_at_fds(int task_dir, bool& saw_any) {
    const unique_fd fd_dir = procfs::open_dir_at(task_dir, "fd", false);
    if (!fd_dir) return procfs::errno_means_denied() ? Inspection::Denied : Inspection::Gone;
    Inspection look = Inspection::Inspected;
    const bool listed = lister_.for_each(fd_dir.get(), [&](const char* name, unsigned char) {
      saw_any = true;
      const auto target = buffer_.read_link_at(fd_dir.get(), name);
      if (!target) {
        if (!procfs::errno_means_denied()) return true;  // closed since the listing
        look = Inspection::Denied;
        return false;
      }
      // socket:[..], pipe:[..], anon_inode:.. are never files in the shm directory.
      if (target->empty() || target->front() != '/') return true;
      const auto named = by_name_.find(std::string(target->substr(target->rfind('/') + 1)));
      if (named == by_name_.end()) return true;
      struct stat st {};
      if (::fstatat(fd_dir.get(), name, &st, 0) == 0) {
        mark(st.st_dev, st.st_ino);
      } else if (!procfs::errno_means_gone()) {
        in_use_[named->second] = true;  // cannot tell which file it is: assume ours
      }
      return true;
    });
    if (!listed && look == Inspection::Inspected) {
      look = procfs::errno_means_denied() ? Inspection::Denied : Inspection::Gone;
    }
    return look;
  }

  Inspection look_at_maps(int task_dir, bool& saw_any) {
    constexpr std::size_t kMaxMaps = 64u << 20;
    const auto text = buffer_.read_file_at(task_dir, "maps", kMaxMaps);
    if (!text) return procfs::errno_means_denied() ? Inspection::Denied : Inspection::Gone;
    if (text->size() >= kMaxMaps) return Inspection::Denied;  // cut short: cannot tell
    std::string_view rest = *text;
    while (!rest.empty()) {
      std::string_view line = procfs::take_line(rest);
      saw_any = true;
      for (int skip = 0; skip < 3; ++skip) procfs::take_token(line);  // range, perms, offset
      const std::string_view dev = procfs::take_token(line);
      const std::string_view inode_text = procfs::take_token(line);
      const std::size_t colon = dev.find(':');
      unsigned major_id = 0, minor_id = 0;
      std::uint64_t inode = 0;
      if (colon != std::string_view::npos && parse_hex(dev.substr(0, colon), major_id) &&
          parse_hex(dev.substr(colon + 1), minor_id) &&
          procfs::parse_whole_unsigned(inode_text, inode) && inode != 0) {
        mark(makedev(major_id, minor_id), inode);
      }
    }
    return Inspection::Inspected;
  }

  static bool parse_hex(std::string_view text, unsigned& out) {
    if (text.empty() || text.size() > 8) return false;
    unsigned value = 0;
    for (const char c : text) {
      const int digit = procfs::is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
      if (digit < 0) return false;
      value = value * 16 + static_cast<unsigned>(digit);
    }
    out = value;
    return true;
  }

  void mark(std::uint64_t device, std::uint64_t inode) {
    const auto found = by_id_.find({device, inode});
    if (found != by_id_.end()) in_use_[found->second] = true;
  }

  std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> by_id_;
  std::unordered_map<std::string, std::size_t> by_name_;
  std::vector<bool> in_use_;
  procfs::ReadBuffer buffer_;
  procfs::DirLister lister_;
};

union SemArg {
  int val;
  struct semid_ds* buf;
  unsigned short* array;
};

RemovalResult from_errno(int error, const std::string& what, std::string_view verb) {
  if (error == EINVAL || error == EIDRM || error == ENOENT) {
    return {RemovalOutcome::Gone, fmt::format("{} no longer exists", what)};
  }
  if (error == EACCES || error == EPERM) {
    return {RemovalOutcome::PermissionDenied,
            fmt::format("not allowed to {} {}: run as root or as its owner", verb, what)};
  }
  return {RemovalOutcome::Failed, fmt::format("cannot {} {}: {}", verb, what, std::strerror(error))};
}

RemovalResult refuse(RemovalOutcome outcome, const std::string& what, std::string_view why) {
  return {outcome, fmt::format("{} {}; not removed", what, why)};
}

bool is_plain_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
}

}  // namespace

bool process_exists(int pid, const std::string& proc_root) {
  if (pid <= 0) return false;  // kill() would address a process group
  if (::kill(pid, 0) == 0 || errno == EPERM) return true;
  // proc_root may show another PID namespace than the one kill() addresses.
  const std::string path = fmt::format("{}/{}", proc_root, pid);
  struct stat st {};
  if (::fstatat(AT_FDCWD, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return true;
  return errno != ENOENT && errno != ENOTDIR;
}

OpenFileScan find_open_or_mapped(const std::vector<FileIdentity>& files,
                                 const std::string& proc_root) {
  if (files.empty()) return {};
  return OpenFileFinder(files).run(proc_root);
}

SemSetState read_sem_set_state(int semid) {
  SemSetState state;
  struct semid_ds ds {};
  SemArg arg{};
  arg.buf = &ds;
  if (::semctl(semid, 0, IPC_STAT, arg) != 0) {
    state.error = errno;
    return state;
  }
  state.key = ds.sem_perm.__key;
  state.mode = ds.sem_perm.mode;
  state.uid = ds.sem_perm.uid;
  state.nsems = static_cast<unsigned>(ds.sem_nsems);
  state.otime = ds.sem_otime;
  state.ctime = ds.sem_ctime;
  state.last_pids.reserve(state.nsems);
  for (unsigned i = 0; i < state.nsems; ++i) {
    const int pid = ::semctl(semid, static_cast<int>(i), GETPID);
    const int waiting = pid < 0 ? -1 : ::semctl(semid, static_cast<int>(i), GETNCNT);
    const int zero_waiting = waiting < 0 ? -1 : ::semctl(semid, static_cast<int>(i), GETZCNT);
    if (zero_waiting < 0) {
      state.error = errno;
      return state;
    }
    state.last_pids.push_back(pid);
    state.waiters += static_cast<unsigned>(waiting + zero_waiting);
  }
  return state;
}

RemovalResult remove_sysv_shm(const SysvShmLeftover& expected) {
  const std::string what = fmt::format("System V shared memory segment {} (key {:#x})",
                                       expected.shmid, static_cast<unsigned>(expected.key));
  struct shmid_ds ds {};
  if (::shmctl(expected.shmid, IPC_STAT, &ds) != 0) return from_errno(errno, what, "inspect");
  if (ds.shm_perm.__key != expected.key || ds.shm_cpid != expected.creator_pid ||
      ds.shm_ctime != expected.ctime || ds.shm_perm.uid != expected.uid ||
      (ds.shm_perm.mode & 0777) != (expected.mode & 0777)) {
    return refuse(RemovalOutcome::Changed, what,
                  "is not the segment found earlier (id reused, or owner or mode changed)");
  }
  if (ds.shm_cpid <= 0) {  // a creator outside our PID namespace: its fate is unknown
    return refuse(RemovalOutcome::InUse, what, "has a creator we cannot see from here");
  }
  if (ds.shm_nattch != 0) {
    return refuse(RemovalOutcome::InUse, what,
                  fmt::format("is attached by {} process(es) now", ds.shm_nattch));
  }
  for (const int pid : {ds.shm_cpid, ds.shm_lpid}) {
    if (process_exists(pid, "/proc")) {
      return refuse(RemovalOutcome::InUse, what,
                    fmt::format("was created or last used by PID {}, which exists (again)", pid));
    }
  }
  if (::shmctl(expected.shmid, IPC_RMID, nullptr) != 0) return from_errno(errno, what, "remove");
  return {RemovalOutcome::Removed, fmt::format("removed {} ({} bytes)", what, ds.shm_segsz)};
}

RemovalResult remove_sysv_sem(const SysvSemLeftover& expected) {
  const std::string what = fmt::format("System V semaphore set {} (key {:#x})", expected.semid,
                                       static_cast<unsigned>(expected.key));
  const SemSetState state = read_sem_set_state(expected.semid);
  if (state.error != 0) return from_errno(state.error, what, "inspect");
  if (state.key != expected.key || state.ctime != expected.ctime ||
      state.nsems != expected.nsems || state.uid != expected.uid ||
      (state.mode & 0777) != (expected.mode & 0777)) {
    return refuse(RemovalOutcome::Changed, what,
                  "is not the set found earlier (id reused, or owner, mode or values changed)");
  }
  if (state.waiters != 0) {
    return refuse(RemovalOutcome::InUse, what,
                  fmt::format("has {} process(es) waiting on it", state.waiters));
  }
  // Without the PIDs seen when it was found (a parsed table), the PIDs alone must clear it.
  if (!expected.last_pids.empty() &&
      (state.last_pids != expected.last_pids || state.otime != expected.otime)) {
    return refuse(RemovalOutcome::InUse, what, "was operated on since it was found");
  }
  for (const int pid : state.last_pids) {
    if (pid <= 0 || process_exists(pid, "/proc")) {
      return refuse(RemovalOutcome::InUse, what,
                    pid <= 0 ? std::string("has a semaphore nobody has operated on yet")
                             : fmt::format("was last operated on by PID {}, which exists", pid));
    }
  }
  SemArg unused{};
  if (::semctl(expected.semid, 0, IPC_RMID, unused) != 0) return from_errno(errno, what, "remove");
  return {RemovalOutcome::Removed, fmt::format("removed {} ({} semaphores)", what, state.nsems)};
}

RemovalResult remove_posix_shm(const PosixShmLeftover& expected, const IpcScanOptions& options) {
  const std::string what = fmt::format("{:?} in {}", expected.name, options.shm_dir);
  if (!is_plain_name(expected.name)) {
    return refuse(RemovalOutcome::Failed, what, "is not a plain file name (refusing any path)");
  }
  const unique_fd dir(::open(options.shm_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    const bool link = errno == ELOOP || errno == ENOTDIR;
    return {procfs::errno_means_denied() ? RemovalOutcome::PermissionDenied : RemovalOutcome::Failed,
            fmt::format("cannot open {}: {}{}; {:?} not removed", options.shm_dir,
                        std::strerror(errno), link ? " (symbolic links are not followed)" : "",
                        expected.name)};
  }
  const auto look = [&](struct stat& st) -> std::optional<RemovalResult> {
    if (::fstatat(dir.get(), expected.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return from_errno(errno, what, "inspect");
    }
    if (S_ISLNK(st.st_mode)) {
      return refuse(RemovalOutcome::Changed, what, "is a symbolic link now (never followed)");
    }
    if (!S_ISREG(st.st_mode) || st.st_dev != expected.device || st.st_ino != expected.inode) {
      return refuse(RemovalOutcome::Changed, what, "is not the file found earlier");
    }
    if (st.st_mtim.tv_sec != expected.mtime) {
      return refuse(RemovalOutcome::InUse, what, "was written since it was found");
    }
    if (st.st_nlink != 1) {
      return refuse(RemovalOutcome::Changed, what, "has another hard link now (cannot check it)");
    }
    return std::nullopt;
  };
  struct stat st {};
  if (auto stop = look(st)) return *stop;
  if (expected.creator_pid && process_exists(*expected.creator_pid, options.proc_root)) {
    return refuse(RemovalOutcome::InUse, what,
                  fmt::format("names PID {} as its creator, which exists", *expected.creator_pid));
  }
  const OpenFileScan scan =
      find_open_or_mapped({{expected.device, expected.inode, expected.name}}, options.proc_root);
  if (scan.in_use.at(0)) return refuse(RemovalOutcome::InUse, what, "is open or mapped by a process");
  if (!scan.blocked_pids.empty()) {
    return refuse(RemovalOutcome::InUse, what,
                  fmt::format("may be in use: PID {} is in uninterruptible sleep (D), so its maps were "
                              "not read",
                              scan.blocked_pids.front()));
  }
  if (scan.processes_not_inspected != 0 && !options.accept_uninspected_processes) {
    return refuse(RemovalOutcome::PermissionDenied, what,
                  fmt::format("may be in use: {} process(es) could not be checked (run as root)",
                              scan.processes_not_inspected));
  }
  if (auto stop = look(st)) return *stop;  // once more, right before the unlink
  if (::unlinkat(dir.get(), expected.name.c_str(), 0) != 0) return from_errno(errno, what, "remove");
  return {RemovalOutcome::Removed,
          fmt::format("removed {} ({} bytes)", what, static_cast<std::uint64_t>(st.st_blocks) * 512)};
}

std::string_view removal_outcome_name(RemovalOutcome outcome) {
  switch (outcome) {
    case RemovalOutcome::Removed: return "removed";
    case RemovalOutcome::Gone: return "gone";
    case RemovalOutcome::Changed: return "changed";
    case RemovalOutcome::InUse: return "in-use";
    case RemovalOutcome::PermissionDenied: return "permission-denied";
    case RemovalOutcome::Failed: return "failed";
  }
  return "unknown";
}

}  // namespace gpureap
