// Per process: one directory fd (O_NOFOLLOW), files read relative to it into one reused
// buffer. Everything read through that fd belongs to one process: once it exits, reads
// through the fd fail with ESRCH even if its PID number is reused.
#include "proc/process_reader.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>

#include "proc/parse_util.hpp"
#include "proc/proc_parse.hpp"
#include "proc/task_state.hpp"

namespace gpureap::procfs {
namespace {

void sort_by_descriptor(std::vector<DeviceFileHandle>& files) {
  std::sort(files.begin(), files.end(),
            [](const DeviceFileHandle& a, const DeviceFileHandle& b) { return a.fd < b.fd; });
}

// DRM and KFD descriptors go to drm_files: every user of device_files means NVIDIA's.
void separate_drm_files(ProcessInfo& info) {
  const auto drm = std::stable_partition(info.device_files.begin(), info.device_files.end(), [](const DeviceFileHandle& h) {
    return h.kind != DeviceFileKind::DrmCard && h.kind != DeviceFileKind::DrmRender && h.kind != DeviceFileKind::Kfd;
  });
  info.drm_files.insert(info.drm_files.end(), std::make_move_iterator(drm), std::make_move_iterator(info.device_files.end()));
  info.device_files.erase(drm, info.device_files.end());
}

// What a later scan checks one by one instead of listing fd/ (FdLookMemory::Details): none
// when fd/ could not be read whole, so that the next scan lists it.
std::optional<std::vector<DeviceFileHandle>> gpu_files_of(const ProcessInfo& info) {
  if (info.fd_access != FdAccess::Ok) return std::nullopt;
  std::vector<DeviceFileHandle> files = info.device_files;
  files.insert(files.end(), info.drm_files.begin(), info.drm_files.end());
  return files;
}

// The kernel's own limit on the arguments' size is a quarter of the stack limit.
constexpr std::size_t kMaxCmdline = 16u << 20;

struct PidName {
  char text[16];
  explicit PidName(pid_t pid) {
    const auto result = std::to_chars(text, text + sizeof(text) - 1, pid);
    *result.ptr = '\0';
  }
};

}  // namespace

ProcessReader::ProcessReader(const ScanClock& clock, std::string_view dev_dir, bool is_procfs)
    : clock_(clock), dev_dir_(dev_dir), is_procfs_(is_procfs) {}

std::optional<ProcessInfo> ProcessReader::read(int root_fd, pid_t pid,
                                               std::vector<DeviceFileHandle>* probed) {
  unique_fd dir;
  int dir_fd = -1;
  std::optional<ProcessInfo> info = read_through_kept(pid, dir_fd);
  if (!info) {
    const PidName name(pid);
    dir = open_dir_at(root_fd, name.text, /*no_follow=*/true);
    if (!dir) return std::nullopt;  // exited since the listing
    dir_fd = dir.get();
    info = read_stat(dir_fd, "stat", pid);
    if (!info) return std::nullopt;
  }
  if (probed != nullptr && !probed->empty() && started_before_scan(*info) && !info->kernel_thread &&
      info->state != 'Z' && info->state != 'X') {
    info->device_files = std::move(*probed);
    sort_by_descriptor(info->device_files);
    separate_drm_files(*info);
  } else {
    read_device_files(dir_fd, *info);
  }
  // A holder's details are read now, through the directory fd that is bound to the process
  // read: no second open and no second stat to prove the PID still names it.
  if (info->holds_any_gpu_file()) holder_details(dir_fd, *info, &dir);
  return info;
}

// A holder's full look through the files kept from its last one: its stat, and dir_fd set,
// when they still name the process they were kept for (same start time); else nullopt, and it
// is read by PID (reaped, its PID another process's now).
std::optional<ProcessInfo> ProcessReader::read_through_kept(pid_t pid, int& dir_fd) {
  if (memory_ == nullptr) return std::nullopt;
  const auto [files, start_time_ticks] = memory_->files_of(pid);
  if (files == nullptr) return std::nullopt;
  std::optional<ProcessInfo> info = read_kept_stat(*files, pid);
  if (!info || info->start_time_ticks != start_time_ticks) return std::nullopt;
  dir_fd = files->dir.get();
  return info;
}

std::optional<ProcessInfo> ProcessReader::read_known_holder(int root_fd, pid_t pid, const FdLookMemory::Details& known) {
  unique_fd opened;
  int dir = -1;
  std::optional<ProcessInfo> info;
  if (known.files != nullptr) {
    dir = known.files->dir.get();
    info = read_kept_stat(*known.files, pid);
  } else {
    const PidName name(pid);
    opened = open_dir_at(root_fd, name.text, /*no_follow=*/true);
    if (!opened) return std::nullopt;
    dir = opened.get();
    info = read_stat(dir, "stat", pid);
  }
  // A zombie's descriptors are its live threads' (read_device_files): listed in full.
  if (!info || info->start_time_ticks != known.start_time_ticks || info->kernel_thread || info->state == 'Z' ||
      info->state == 'X') {
    return std::nullopt;
  }
  for (const DeviceFileHandle& file : *known.gpu_files) {
    if (!still_holds(dir, file)) return std::nullopt;
  }
  info->device_files = *known.gpu_files;
  separate_drm_files(*info);
  holder_details(dir, *info);
  return info;
}

// Through the stat file kept open: nullopt once the process it was opened for is reaped.
std::optional<ProcessInfo> ProcessReader::read_kept_stat(const KeptHolderFiles& files, pid_t pid) {
  return info_from_stat(buffer_.read_kept_proc_file(files.stat.get(), /*one_piece=*/true), pid);
}

// The holder's directory (taken from `dir`), its stat and, with one thread, its children file,
// for the scans between its full looks; null past the budget or when one cannot be opened.
std::shared_ptr<const KeptHolderFiles> ProcessReader::keep_files(unique_fd* dir, const ProcessInfo& info) {
  if (auto kept = memory_->files_of(info.pid, info.start_time_ticks)) return kept;
  if (dir == nullptr || !*dir || file_budget_ == nullptr || !is_procfs_) return nullptr;
  if (file_budget_->fetch_sub(1, std::memory_order_relaxed) <= 0) return nullptr;
  auto files = std::make_shared<KeptHolderFiles>();
  files->stat = unique_fd(::openat(dir->get(), "stat", O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!files->stat) return nullptr;
  if (info.threads == 1) {
    const PidName name(info.pid);
    const std::string children = std::string("task/") + name.text + "/children";
    files->children = unique_fd(::openat(dir->get(), children.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  }
  files->dir = std::move(*dir);
  return files;
}

// Whether descriptor file.fd of the process whose directory is pid_fd is still that GPU file:
// the same device node, as list_device_files would find it. Where the node is here, its open
// file's identity is the whole proof (a descriptor to any other file fails it, and the link,
// a path, proves nothing list_device_files does not check again), so the link is not read; a
// node gone here leaves the link as part of the proof.
bool ProcessReader::still_holds(int pid_fd, const DeviceFileHandle& file) {
  char entry[24] = "fd/";
  *std::to_chars(entry + 3, entry + sizeof entry - 1, file.fd).ptr = '\0';
  if (is_procfs_ && nodes_.has_node(file.path)) return nodes_.is_that_node(pid_fd, entry, file.path);
  const auto target = buffer_.read_link_at(pid_fd, entry);
  if (!target || *target != file.path) return false;
  return !is_procfs_ || nodes_.is_that_node(pid_fd, entry, file.path);
}

void ProcessReader::holder_details(int pid_fd, ProcessInfo& info, unique_fd* dir_to_keep) {
  const FdLookMemory::Details* known = memory_ != nullptr ? memory_->details_for(info.pid, info.start_time_ticks) : nullptr;
  if (known == nullptr) {
    read_detail_files(pid_fd, info);
    if (kept_ != nullptr) {
      kept_->emplace_back(info.pid, FdLookMemory::Details{info.start_time_ticks, memory_->round() + memory_->details_every(),
                                                          info.uid, info.real_uid, info.saved_uid, info.ns_pids,
                                                          info.cmdline, info.exe, info.container, info.maps_nvml_only,
                                                          gpu_files_of(info), keep_files(dir_to_keep, info)});
    }
    return;
  }
  info.details_loaded = true;
  info.uid = known->uid;
  info.real_uid = known->real_uid;
  info.saved_uid = known->saved_uid;
  info.ns_pids = known->ns_pids;
  info.cmdline = known->cmdline;
  info.exe = known->exe;
  info.container = known->container;
  info.maps_nvml_only = known->maps_nvml_only;
  read_wchan(pid_fd, info);
  if (kept_ != nullptr) {
    kept_->emplace_back(info.pid, *known);
    kept_->back().second.gpu_files = gpu_files_of(info);
    if (known->files == nullptr) kept_->back().second.files = keep_files(dir_to_keep, info);
  }
}

std::optional<ProcessInfo> ProcessReader::read_without_files(int root_fd, pid_t pid) {
  char path[32];
  const auto end = std::to_chars(path, path + 16, pid).ptr;
  std::string_view("/stat").copy(end, 5);
  end[5] = '\0';
  std::optional<ProcessInfo> info = read_stat(root_fd, path, pid);
  if (info && (info->state == 'Z' || info->state == 'X')) return read(root_fd, pid);
  return info;
}

std::optional<ProcessInfo> ProcessReader::read_stat(int dirfd, const char* path, pid_t pid) {
  return info_from_stat(buffer_.read_proc_file_at(dirfd, path), pid);
}

std::optional<ProcessInfo> ProcessReader::info_from_stat(std::optional<std::string_view> text, pid_t pid) const {
  if (!text) return std::nullopt;
  std::optional<StatFields> stat = parse_stat(*text);
  if (!stat || stat->pid != pid) return std::nullopt;
  std::optional<ProcessInfo> info(std::in_place);
  fill_from_stat(*info, *stat);
  return info;
}

// Two clock ticks of margin: start times are whole ticks, rounded down.
bool ProcessReader::started_before_scan(const ProcessInfo& info) const {
  const double scan_start_ticks = (clock_.now_unix - clock_.boot_time_unix) * clock_.ticks_per_second;
  return static_cast<double>(info.start_time_ticks) + 2 < scan_start_ticks;
}

void ProcessReader::fill_from_stat(ProcessInfo& info, StatFields& stat) const {
  const double hz = clock_.ticks_per_second;
  info.pid = stat.pid;
  info.ppid = stat.ppid;
  info.pgid = stat.pgid;
  info.session = stat.session;
  info.state = stat.state;
  info.comm = std::move(stat.comm);
  info.start_time_ticks = stat.start_time_ticks;
  info.threads = stat.num_threads;
  info.kernel_thread = (stat.flags & kPfKthread) != 0;
  info.cpu_seconds = static_cast<double>(stat.utime_ticks + stat.stime_ticks) / hz;
  info.start_time_unix = clock_.boot_time_unix + static_cast<double>(stat.start_time_ticks) / hz;
  info.elapsed_seconds = std::max(0.0, clock_.now_unix - info.start_time_unix);
  info.cpu_percent =
      info.elapsed_seconds > 0 ? info.cpu_seconds / info.elapsed_seconds * 100.0 : 0.0;
  info.rss_bytes = stat.rss_pages * clock_.page_size;
}

void ProcessReader::read_device_files(int pid_fd, ProcessInfo& info) {
  if (info.kernel_thread) return;  // no file table
  if (info.state == 'Z' || info.state == 'X') {
    // A zombie's descriptors are closed, unless only its main thread exited
    // (pthread_exit in main): then the live threads still hold the file table, which
    // /proc/<pid>/fd no longer shows but /proc/<pid>/task/<tid>/fd does.
    const unique_fd tasks = open_dir_at(pid_fd, "task", false);
    if (!tasks) return;
    std::vector<pid_t> tids;
    lister_.for_each(tasks.get(), [&tids, &info](const char* name, unsigned char) {
      pid_t tid = 0;
      if (parse_pid_name(name, tid) && tid != info.pid) tids.push_back(tid);
      return true;
    });
    for (const pid_t tid : tids) {
      const PidName tid_name(tid);
      const unique_fd task = open_dir_at(tasks.get(), tid_name.text, true);
      if (!task) continue;
      const unique_fd fd_dir = open_dir_at(task.get(), "fd", false);
      if (fd_dir && list_device_files(fd_dir.get(), info)) return;
    }
    return;
  }
  const unique_fd fd_dir = open_dir_at(pid_fd, "fd", false);
  if (!fd_dir) {
    info.fd_access = errno_means_denied() ? FdAccess::Denied : FdAccess::Gone;
    return;
  }
  list_device_files(fd_dir.get(), info);
}

// Reads every link of an open fd/ directory. False when the listing failed.
bool ProcessReader::list_device_files(int fd_dir, ProcessInfo& info) {
  const bool listed = lister_.for_each(
      fd_dir,
      [&](const char* name, unsigned char) {
        const auto target = buffer_.read_link_at(fd_dir, name);
        if (!target) {
          if (!errno_means_denied()) return true;  // closed since the listing
          info.fd_access = FdAccess::Denied;        // e.g. a process with more privileges
          return false;
        }
        if (auto handle = classify_fd_link(name, *target, dev_dir_)) {
          if (!is_procfs_ || nodes_.holds_that_node(fd_dir, name, handle->path)) info.device_files.push_back(std::move(*handle));
        }
        return true;
      },
      is_procfs_);
  if (!listed && info.fd_access == FdAccess::Ok) {
    info.fd_access = errno_means_denied() ? FdAccess::Denied : FdAccess::Gone;
  }
  sort_by_descriptor(info.device_files);
  separate_drm_files(info);
  return listed;
}

bool ProcessReader::read_details(int root_fd, ProcessInfo& info, UserNames& users) {
  const PidName name(info.pid);
  const unique_fd dir = open_dir_at(root_fd, name.text, /*no_follow=*/true);
  if (!dir) return false;
  // The PID may have been reused since phase 1: go on only if this is still the process
  // read then (same start time). Later reads go through `dir`, bound to this process.
  const auto text = buffer_.read_proc_file_at(dir.get(), "stat");
  if (!text) return false;
  const std::optional<StatFields> stat = parse_stat(*text);
  if (!stat || stat->pid != info.pid || stat->start_time_ticks != info.start_time_ticks) {
    return false;
  }
  info.state = stat->state;  // wchan below must match the state shown
  info.threads = stat->num_threads;
  read_detail_files(dir.get(), info);
  info.user = users.name(info.uid);
  return true;
}

void ProcessReader::read_detail_files(int pid_fd, ProcessInfo& info) {
  info.details_loaded = true;
  std::optional<StatusFields> status;
  if (const auto text = buffer_.read_proc_file_at(pid_fd, "status")) status = parse_status(*text);
  info.ns_pids.clear();
  if (status) {
    info.uid = status->effective_uid;  // like ps's USER column
    info.real_uid = status->real_uid;
    info.saved_uid = status->saved_uid;
    info.ns_pids = std::move(status->ns_pids);
  } else if (struct stat st {}; fstat(pid_fd, &st) == 0) {
    info.uid = st.st_uid;  // /proc/<pid> is owned by the effective uid of a dumpable process
    info.real_uid = info.saved_uid = info.uid;
  }
  if (info.ns_pids.empty()) info.ns_pids = {info.pid};  // kernels before 4.1 have no NSpid

  // cmdline and maps take the mmap lock, which a thread in D may hold: never read then
  // (the command falls back to comm).
  const bool may_block =
      address_space_may_block(pid_fd, info.pid, info.state, info.threads, buffer_, lister_);
  info.cmdline.clear();
  if (!may_block) {
    // A read of cmdline returns less than asked only at the end of the arguments.
    if (const auto text = buffer_.read_proc_file_at(pid_fd, "cmdline", kMaxCmdline)) {
      info.cmdline = parse_cmdline(*text);
    }
  }
  if (const auto target = buffer_.read_link_at(pid_fd, "exe")) {
    info.exe.assign(*target);
  } else {
    info.exe.clear();  // denied, a kernel thread, or gone
  }
  if (const auto text = buffer_.read_proc_file_at(pid_fd, "cgroup")) {
    info.container = parse_cgroup(*text);
  } else {
    info.container.reset();
  }
  info.maps_nvml_only.reset();
  if (!may_block && info.state != 'Z' && info.state != 'X') read_gpu_library_maps(pid_fd, info);  // zombies: no address space
  read_wchan(pid_fd, info);
}

void ProcessReader::read_wchan(int pid_fd, ProcessInfo& info) {
  info.wchan.clear();
  if (info.state != 'D') return;
  if (const auto text = buffer_.read_file_at(pid_fd, "wchan")) {
    std::string_view wchan = *text;
    const std::string_view symbol = take_token(wchan);
    if (symbol != "0") info.wchan.assign(symbol);
  }
}

// Only for a process whose address space cannot block us (see read_detail_files).
void ProcessReader::read_gpu_library_maps(int pid_fd, ProcessInfo& info) {
  if (!info.holds_any_device_file()) return;
  // The first libcuda mapping answers: a PyTorch process's maps run to hundreds of KB.
  constexpr std::string_view kCuda = "/libcuda.so";
  const auto text = buffer_.read_file_until_at(pid_fd, "maps", kCuda);
  if (!text) return;
  info.maps_nvml_only = text->find(kCuda) == std::string_view::npos &&
                        text->find("/libnvidia-ml.so") != std::string_view::npos;
}

}  // namespace gpureap::procfs
