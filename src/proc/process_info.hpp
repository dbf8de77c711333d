// What Linux knows about one process, as read from /proc. Shared by every command.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace gpureap {

// A container a process runs in, recognised from its cgroup path.
struct ContainerRef {
  std::string runtime;  // "docker", "containerd", "cri-o", "podman", "kubernetes"
  std::string id;       // full container id (64 hex for docker), or "" when only a pod is known
  std::string pod_uid;  // Kubernetes pod UID (dashes restored), "" when not in a pod
  std::string cgroup_path;  // the cgroup path it was recognised from (the line's third field)
  // Set when the path runs through a user's own systemd manager (user@<uid>.service): systemd
  // delegates that tree to the user, who may create and name cgroups in it as they like, so the
  // id is the user's word, not a runtime's. The uid is the one the path names.
  std::optional<uid_t> rootless_uid;
};

// Whether `prefix` (not empty) begins the container's id or its pod's UID, for a selection made
// by `selector` (the selecting user's uid). A rootless container satisfies only its own user's
// selection: anyone can give a cgroup in their delegated tree any container's id. Without a
// selector (watch's exclusions, protections and rules, written by root for every user) it never
// satisfies one.
bool container_selected_by(const ContainerRef& container, const std::string& prefix, std::optional<uid_t> selector);

// How a person reads the container: "docker ab12cd34ef56", "kubernetes pod 1f2e3d4c",
// "podman 0a1b2c3d4e5f (rootless, uid 1000)". Not escaped: the id is checked hex, the pod UID
// hex and dashes, the runtime ours.
std::string container_words(const ContainerRef& container);

// One open descriptor on a GPU device file. Control..Modeset are NVIDIA's; DrmCard and
// DrmRender are any DRM driver's /dev/dri/card<N> and /dev/dri/renderD<N> (AMD, Intel, ...),
// Kfd is ROCm's /dev/kfd.
enum class DeviceFileKind { Control, Gpu, Uvm, UvmTools, Caps, Modeset, DrmCard, DrmRender, Kfd };

struct DeviceFileHandle {
  int fd = -1;
  DeviceFileKind kind = DeviceFileKind::Control;
  int minor = -1;            // for Gpu: the N of nvidia<N>; for Caps: the N of nvidia-cap<N>;
                             // for DrmCard and DrmRender: the N of card<N> and renderD<N> (the DRM minor)
  std::string path;          // the link target, e.g. "/dev/nvidia0"
};

// PF_KTHREAD in stat's flags: a kernel thread.
inline constexpr unsigned kPfKthread = 0x00200000;

// Fields of /proc/<pid>/stat, cut at the last ')' of the name.
struct StatFields {
  pid_t pid = 0;
  std::string comm;   // may contain spaces and ')'
  char state = '?';   // R S D Z T t X I ...
  pid_t ppid = 0;
  pid_t pgid = 0;
  pid_t session = 0;
  std::uint64_t utime_ticks = 0;
  std::uint64_t stime_ticks = 0;
  std::uint64_t start_time_ticks = 0;  // since boot, in clock ticks
  std::uint64_t rss_pages = 0;
  unsigned flags = 0;  // kPfKthread marks kernel threads
  std::int64_t num_threads = 0;
};

// Fields of /proc/<pid>/status that stat lacks.
struct StatusFields {
  std::string name;
  uid_t real_uid = 0;
  uid_t effective_uid = 0;
  uid_t saved_uid = 0;         // the kernel's kill permission looks at real and saved
  gid_t real_gid = 0;
  gid_t effective_gid = 0;
  std::vector<gid_t> groups;   // supplementary groups
  std::vector<pid_t> ns_pids;  // NSpid: outermost (this /proc's namespace) first
};

enum class FdAccess { Ok, Denied, Gone };

struct ProcessInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgid = 0;
  pid_t session = 0;
  char state = '?';
  std::string wchan;            // only read for state 'D'
  uid_t uid = 0;                // effective uid (as ps USER shows); read with the details
  std::string user;             // name for uid, or the number when unknown
  uid_t real_uid = 0;           // real and saved uids: whom the kernel lets signal it
  uid_t saved_uid = 0;          //   (read with the details; the effective uid when unknown)
  std::string comm;
  std::vector<std::string> cmdline;  // empty for kernel threads and zombies
  std::string exe;              // readlink of exe, "" when denied or gone
  std::uint64_t start_time_ticks = 0;
  double start_time_unix = 0;   // seconds since the epoch
  double elapsed_seconds = 0;
  double cpu_seconds = 0;       // utime + stime
  double cpu_percent = 0;       // cpu_seconds / elapsed_seconds * 100 (lifetime average)
  std::uint64_t rss_bytes = 0;
  bool kernel_thread = false;
  std::int64_t threads = 0;     // when stat was read (0: unknown)
  std::vector<pid_t> ns_pids;   // NSpid chain; ns_pids.back() is the PID inside its container
  std::optional<ContainerRef> container;
  FdAccess fd_access = FdAccess::Ok;
  std::vector<DeviceFileHandle> device_files;  // open descriptors on NVIDIA device files
  std::vector<DeviceFileHandle> drm_files;     // open descriptors on DRM device files and /dev/kfd
  // Whether it maps libnvidia-ml without libcuda, read with the details of device-file holders
  // only (nullopt when unknown). A CUDA process and every fork of it map libcuda; a pure NVML
  // client (nvidia-smi, an exporter, DCGM) maps libnvidia-ml alone, yet holds the device files.
  std::optional<bool> maps_nvml_only;
  bool details_loaded = false;  // status, cmdline, exe, cgroup (and wchan) have been read

  // The command line joined by spaces, or "[comm]" when there is none.
  std::string command() const;
  bool holds_gpu_minor(int minor) const;
  bool holds_any_device_file() const { return !device_files.empty(); }
  bool holds_any_drm_file() const { return !drm_files.empty(); }
  // Whether the scan reads its details (status, cmdline, cgroup, ...): it holds a GPU file of
  // any vendor.
  bool holds_any_gpu_file() const { return holds_any_device_file() || holds_any_drm_file(); }
};

// The file name of an executable link as /proc/<pid>/exe reads it: "/usr/bin/python3.11" ->
// "python3.11"; a deleted binary's " (deleted)" suffix is dropped.
std::string executable_basename(const std::string& exe);

}  // namespace gpureap
