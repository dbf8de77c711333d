// Finding leftovers: System V rows from /proc/sysvipc, judged by nattch and whether the PIDs
// that touched them still exist; POSIX files in the shm directory, judged by a look through
// every process's fd links and memory maps (the kernel keeps no creator for them).
#include "doctor/ipc_leftovers.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

#include <dirent.h>
#include <fcntl.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "doctor/ipc_removal.hpp"
#include "proc/parse_util.hpp"
#include "proc/proc_io.hpp"

namespace gpureap {
namespace {

using procfs::take_token;

// Up to N whitespace-separated tokens of a line; count is N + 1 when more remain.
template <std::size_t N>
struct Tokens {
  std::array<std::string_view, N> at{};
  std::size_t count = 0;
  explicit Tokens(std::string_view line) {
    for (std::string_view token = take_token(line); !token.empty(); token = take_token(line)) {
      if (count == N) {
        ++count;
        return;
      }
      at[count++] = token;
    }
  }
};

bool parse_int(std::string_view token, int& out) {
  std::int64_t value = 0;
  if (!procfs::take_signed(token, value) || !token.empty()) return false;
  if (value < INT_MIN || value > INT_MAX) return false;
  out = static_cast<int>(value);
  return true;
}

bool parse_octal(std::string_view token, unsigned& out) {
  if (token.empty() || token.size() > 10) return false;  // 10 octal digits fit in 32 bits
  unsigned value = 0;
  for (const char c : token) {
    if (c < '0' || c > '7') return false;
    value = value * 8 + static_cast<unsigned>(c - '0');
  }
  out = value;
  return true;
}

using procfs::parse_whole_unsigned;

// key shmid perms size cpid lpid nattch uid gid cuid cgid atime dtime ctime [rss swap]
std::optional<SysvShmLeftover> parse_shm_row(std::string_view line) {
  const Tokens<16> t(line);
  if (t.count < 14 || t.count > 16) return std::nullopt;
  SysvShmLeftover row;
  unsigned gid = 0, cgid = 0;
  const bool ok = parse_int(t.at[0], row.key) && parse_whole_unsigned(t.at[1], row.shmid) &&
                  parse_octal(t.at[2], row.mode) && parse_whole_unsigned(t.at[3], row.size_bytes) &&
                  parse_whole_unsigned(t.at[4], row.creator_pid) &&
                  parse_whole_unsigned(t.at[5], row.last_pid) &&
                  parse_whole_unsigned(t.at[6], row.attached) && parse_whole_unsigned(t.at[7], row.uid) &&
                  parse_whole_unsigned(t.at[8], gid) && parse_whole_unsigned(t.at[9], row.creator_uid) &&
                  parse_whole_unsigned(t.at[10], cgid) && parse_whole_unsigned(t.at[11], row.atime) &&
                  parse_whole_unsigned(t.at[12], row.dtime) && parse_whole_unsigned(t.at[13], row.ctime);
  if (!ok) return std::nullopt;
  std::uint64_t value = 0;
  if (t.count >= 15) {
    if (!parse_whole_unsigned(t.at[14], value)) return std::nullopt;
    row.rss_bytes = value;
  }
  if (t.count == 16) {
    if (!parse_whole_unsigned(t.at[15], value)) return std::nullopt;
    row.swap_bytes = value;
  }
  return row;
}

// key semid perms nsems uid gid cuid cgid otime ctime
std::optional<SysvSemLeftover> parse_sem_row(std::string_view line) {
  const Tokens<10> t(line);
  if (t.count != 10) return std::nullopt;
  SysvSemLeftover row;
  unsigned gid = 0, cgid = 0;
  const bool ok = parse_int(t.at[0], row.key) && parse_whole_unsigned(t.at[1], row.semid) &&
                  parse_octal(t.at[2], row.mode) && parse_whole_unsigned(t.at[3], row.nsems) &&
                  parse_whole_unsigned(t.at[4], row.uid) && parse_whole_unsigned(t.at[5], gid) &&
                  parse_whole_unsigned(t.at[6], row.creator_uid) &&
                  parse_whole_unsigned(t.at[7], cgid) && parse_whole_unsigned(t.at[8], row.otime) &&
                  parse_whole_unsigned(t.at[9], row.ctime);
  if (!ok) return std::nullopt;
  return row;
}

std::int64_t now_seconds() {
  struct timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);
  return now.tv_sec;
}

// A clock that runs behind an object's times makes it look new: not reported (safe side).
bool old_enough(std::int64_t newest_change, std::int64_t now, const IpcScanOptions& options) {
  return static_cast<double>(now - newest_change) >= options.min_age_seconds;
}

std::optional<std::string_view> read_table(procfs::ReadBuffer& buffer, const std::string& path,
                                           std::string_view what, IpcLeftovers& out) {
  auto text = buffer.read_file_at(AT_FDCWD, path.c_str());
  if (!text) {
    out.errors.push_back(fmt::format("cannot read {}: {}; {} were not checked", path,
                                     std::strerror(errno), what));
  }
  return text;
}

void find_sysv_shm(const IpcScanOptions& options, std::int64_t now, procfs::ReadBuffer& buffer,
                   IpcLeftovers& out) {
  const auto text = read_table(buffer, options.proc_root + "/sysvipc/shm",
                               "System V shared memory segments", out);
  if (!text) return;
  for (SysvShmLeftover& row : parse_sysv_shm_table(*text)) {
    if (row.attached != 0 || (row.mode & SHM_DEST) != 0) continue;
    // cpid 0: made by a process outside our PID namespace, whose fate we cannot see.
    if (row.creator_pid <= 0 || process_exists(row.creator_pid, options.proc_root)) continue;
    if (row.last_pid > 0 && process_exists(row.last_pid, options.proc_root)) continue;
    if (!old_enough(std::max({row.atime, row.dtime, row.ctime}), now, options)) continue;
    out.shm.push_back(std::move(row));
  }
}

void find_sysv_sem(const IpcScanOptions& options, std::int64_t now, procfs::ReadBuffer& buffer,
                   IpcLeftovers& out) {
  const auto text = read_table(buffer, options.proc_root + "/sysvipc/sem",
                               "System V semaphore sets", out);
  if (!text) return;
  std::size_t denied = 0;
  for (SysvSemLeftover& row : parse_sysv_sem_table(*text)) {
    const SemSetState state = read_sem_set_state(row.semid);
    if (state.error == EACCES || state.error == EPERM) ++denied;
    // Gone, unreadable, or another set under a reused id since the table was read.
    if (state.error != 0 || state.key != row.key || state.ctime != row.ctime) continue;
    if (state.waiters != 0 || state.last_pids.empty()) continue;
    const bool all_gone = std::all_of(state.last_pids.begin(), state.last_pids.end(), [&](int pid) {
      return pid > 0 && !process_exists(pid, options.proc_root);
    });
    if (!all_gone || !old_enough(std::max(state.otime, state.ctime), now, options)) continue;
    row.otime = state.otime;
    row.last_pids = state.last_pids;
    out.semaphores.push_back(std::move(row));
  }
  if (denied != 0) {
    out.errors.push_back(fmt::format(
        "could not inspect {} System V semaphore set(s): permission denied; run as root to check "
        "them", denied));
  }
}

void find_posix(const IpcScanOptions& options, std::int64_t now, IpcLeftovers& out) {
  const procfs::unique_fd dir(
      ::open(options.shm_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    const bool link = errno == ELOOP || errno == ENOTDIR;
    out.errors.push_back(fmt::format("cannot open {}: {}{}; POSIX shared memory was not checked",
                                     options.shm_dir, std::strerror(errno),
                                     link ? " (symbolic links are not followed: pass the real "
                                            "directory)" : ""));
    return;
  }
  std::vector<PosixShmLeftover> candidates;
  procfs::DirLister lister;
  const bool listed = lister.for_each(dir.get(), [&](const char* name, unsigned char type) {
    if (type != DT_REG && type != DT_UNKNOWN) return true;
    struct stat st {};
    if (::fstatat(dir.get(), name, &st, AT_SYMLINK_NOFOLLOW) != 0) return true;  // gone since
    // A second hard link would show under another name in fd links: cannot check, skip.
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1) return true;
    if (!old_enough(std::max(st.st_mtim.tv_sec, st.st_ctim.tv_sec), now, options)) return true;
    PosixShmLeftover file;
    file.name = name;
    file.creator_pid = creator_pid_from_shm_name(file.name);
    if (file.creator_pid && process_exists(*file.creator_pid, options.proc_root)) return true;
    file.path = options.shm_dir + "/" + file.name;
    file.size_bytes = static_cast<std::uint64_t>(st.st_size);
    file.allocated_bytes = static_cast<std::uint64_t>(st.st_blocks) * 512;
    file.uid = st.st_uid;
    file.mtime = st.st_mtim.tv_sec;
    file.device = st.st_dev;
    file.inode = st.st_ino;
    file.semaphore = file.name.rfind("sem.", 0) == 0;
    candidates.push_back(std::move(file));
    return true;
  });
  if (!listed) {
    out.errors.push_back(fmt::format("listing {} failed: {}; POSIX results may be incomplete",
                                     options.shm_dir, std::strerror(errno)));
  }
  if (candidates.empty()) return;
  std::vector<FileIdentity> ids;
  ids.reserve(candidates.size());
  for (const auto& file : candidates) ids.push_back({file.device, file.inode, file.name});
  OpenFileScan scan = find_open_or_mapped(ids, options.proc_root);
  out.processes_not_inspected = scan.processes_not_inspected;
  out.blocked_pids = scan.blocked_pids;
  for (auto& error : scan.errors) out.errors.push_back(std::move(error));
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!scan.in_use[i]) out.posix.push_back(std::move(candidates[i]));
  }
}

bool take_digits(std::string_view& text) {
  std::size_t i = 0;
  while (i < text.size() && procfs::is_digit(text[i])) ++i;
  text.remove_prefix(i);
  return i != 0;
}

}  // namespace

std::vector<SysvShmLeftover> parse_sysv_shm_table(std::string_view text) {
  std::vector<SysvShmLeftover> rows;
  while (!text.empty()) {
    if (auto row = parse_shm_row(procfs::take_line(text))) rows.push_back(std::move(*row));
  }
  return rows;
}

std::vector<SysvSemLeftover> parse_sysv_sem_table(std::string_view text) {
  std::vector<SysvSemLeftover> rows;
  while (!text.empty()) {
    if (auto row = parse_sem_row(procfs::take_line(text))) rows.push_back(std::move(*row));
  }
  return rows;
}

std::optional<int> creator_pid_from_shm_name(std::string_view name) {
  constexpr std::string_view kTorch = "torch_";
  if (name.substr(0, kTorch.size()) != kTorch) return std::nullopt;
  name.remove_prefix(kTorch.size());
  int pid = 0;
  if (!procfs::take_unsigned(name, pid) || pid <= 0) return std::nullopt;
  // "_<random>" then, in current releases, "_<counter>".
  int parts = 0;
  for (; parts < 2 && !name.empty(); ++parts) {
    if (name.front() != '_') return std::nullopt;
    name.remove_prefix(1);
    if (!take_digits(name)) return std::nullopt;
  }
  if (parts == 0 || !name.empty()) return std::nullopt;
  return pid;
}

IpcLeftovers find_ipc_leftovers(const IpcScanOptions& options) {
  IpcLeftovers out;
  const std::int64_t now = now_seconds();
  procfs::ReadBuffer buffer;
  find_sysv_shm(options, now, buffer, out);
  find_sysv_sem(options, now, buffer, out);
  find_posix(options, now, out);
  return out;
}

}  // namespace gpureap
