// Pure parsers for /proc file contents. No I/O: the scanner reads, these interpret,
// so fixture tests can feed them any text (including hostile process names).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proc/process_info.hpp"

namespace gpureap {

// /proc/<pid>/stat. The name is cut at the *last* ')' so names with spaces and ')' survive.
std::optional<StatFields> parse_stat(std::string_view text);

// /proc/<pid>/status: Name, Uid (real, effective, saved), NSpid.
std::optional<StatusFields> parse_status(std::string_view text);

// /proc/<pid>/fdinfo/<fd>: the open file's flags (the "flags:" line, octal), nullopt without
// one that parses whole.
std::optional<unsigned long> parse_fdinfo_flags(std::string_view text);

// /proc/<pid>/cmdline: NUL-separated arguments (a trailing NUL is not an extra argument).
std::vector<std::string> parse_cmdline(std::string_view text);

// /proc/<pid>/cgroup (v1 and v2 lines): the container the process runs in, if any.
// Recognises docker-<64hex>.scope, /docker/<64hex>, cri-containerd-<id>.scope,
// crio-<id>.scope, libpod-<id>.scope and kubepods...pod<uid>/<id> (both cgroupfs and systemd drivers).
std::optional<ContainerRef> parse_cgroup(std::string_view text);

// A /proc/<pid>/fd/<n> link target: is it a GPU device file under dev_dir ("/dev" normally)?
// nvidiactl, nvidia<N>, nvidia-uvm, nvidia-uvm-tools, nvidia-modeset, nvidia-caps/nvidia-cap<N>.
std::optional<DeviceFileHandle> classify_device_path(std::string_view link_target,
                                                     std::string_view dev_dir);

// A DRM device file under dev_dir: dri/card<N> (DrmCard), dri/renderD<N> (DrmRender), or
// ROCm's kfd (Kfd). Named as udev names them; the minor is the N of the name.
std::optional<DeviceFileHandle> classify_drm_path(std::string_view link_target, std::string_view dev_dir);

// The same for the entry `fd_name` of a /proc/<pid>/fd listing, NVIDIA's files and DRM's: also
// its descriptor number.
std::optional<DeviceFileHandle> classify_fd_link(std::string_view fd_name, std::string_view link_target,
                                                 std::string_view dev_dir);

}  // namespace gpureap
