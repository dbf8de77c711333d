// The simulated DRM driver's state (docs/simulator.md, "AMD and Intel GPUs"): what `gpusim
// drm-add` records of each device, what a `gpusim-drm-client` records of itself, and where each
// lives in the state directory.
//
//   drm/devices.json          the devices (replaced atomically by drm-add)
//   drm/nodes/<node>          a hard link to dev/dri/<node>: the driver tests the clients' locks
//                             through it, so that its own descriptors never point into dev/
//   drm/nodes/kfd             a hard link to dev/kfd, for the same purpose
//   drm/clients/<id>.json     one record per client (open file description), written by its creator
//   drm/kfd/<pid>.json        what a process that opened dev/kfd claims of its KFD process (its
//                             VRAM); the driver shows it only for a process it sees holding dev/kfd
//   (drm/, drm/clients/ and drm/kfd/ are 01777: any user's clients write their own records there,
//   and none can replace or remove another's)
//   drm/.lock                 the client id counter, rewritten under an flock on it
//   drm/cycle                 how many cycles the driver has completed
//   sys/...                   the sysfs tree the kernel would show (GPUREAP_SYS_DIR)
//   fdinfo/<pid>/fdinfo/<fd>  what /proc/<pid>/fdinfo/<fd> would show (GPUREAP_FDINFO_DIR)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "common/result.hpp"

namespace gpusim::drm {

class DrmLayout {
 public:
  explicit DrmLayout(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  std::string dir() const { return root_ + "/drm"; }
  std::string devices() const { return dir() + "/devices.json"; }
  std::string nodes_dir() const { return dir() + "/nodes"; }
  std::string node_link(const std::string& node) const { return nodes_dir() + "/" + node; }
  std::string clients_dir() const { return dir() + "/clients"; }
  std::string client(std::uint64_t id) const { return clients_dir() + "/" + std::to_string(id) + ".json"; }
  std::string kfd_dir() const { return dir() + "/kfd"; }
  std::string kfd_record(pid_t pid) const { return kfd_dir() + "/" + std::to_string(pid) + ".json"; }
  std::string lock() const { return dir() + "/.lock"; }
  std::string cycle() const { return dir() + "/cycle"; }
  std::string dev_dir() const { return root_ + "/dev"; }
  std::string dri_dir() const { return dev_dir() + "/dri"; }
  std::string dri_node(const std::string& node) const { return dri_dir() + "/" + node; }
  std::string kfd_dev() const { return dev_dir() + "/kfd"; }
  std::string kfd_link() const { return node_link("kfd"); }
  std::string sys() const { return root_ + "/sys"; }
  std::string sys_device(const std::string& pci) const { return sys() + "/devices/" + pci; }
  std::string kfd_sys() const { return sys() + "/class/kfd/kfd"; }
  std::string kfd_proc(pid_t pid) const { return kfd_sys() + "/proc/" + std::to_string(pid); }
  std::string fdinfo_root() const { return root_ + "/fdinfo"; }

 private:
  std::string root_;
};

enum class FdinfoFormat { Current, Legacy };

struct DrmDevice {
  std::string pci;              // "0000:03:00.0"
  std::string driver = "amdgpu";  // amdgpu, i915, xe
  std::uint64_t vram_total = 16ULL << 30;
  std::uint64_t driver_vram = 128ULL << 20;  // what the driver itself keeps in VRAM
  unsigned card = 1;
  unsigned render = 128;
  FdinfoFormat fdinfo = FdinfoFormat::Current;
  bool kfd = false;
  std::uint32_t gpu_id = 0;     // KFD topology gpu_id (with kfd)
  std::string xgmi_hive;        // hex, "" without a hive
  unsigned release_delay_ms = 0;

  std::string card_node() const { return "card" + std::to_string(card); }
  std::string render_node() const { return "renderD" + std::to_string(render); }
  std::uint16_t vendor_id() const { return driver == "amdgpu" ? 0x1002 : 0x8086; }
};

Result<std::vector<DrmDevice>> load_devices(const DrmLayout& layout);  // empty when none added
Status store_devices(const DrmLayout& layout, const std::vector<DrmDevice>& devices);
// The device whose card or render node is `node`, or null.
const DrmDevice* device_with_node(const std::vector<DrmDevice>& devices, const std::string& node);

// One client: an open file description of a node, identified by the OFD lock its creator took
// on byte [id, id+1) of the node file.
struct ClientRecord {
  std::uint64_t id = 0;
  std::string pci;
  std::string node;  // "renderD128"
  std::uint64_t vram = 0, gtt = 0, shared = 0;
  unsigned busy_percent = 0;
  std::int64_t start_ns = 0;  // CLOCK_REALTIME when the client was created
  pid_t pid = 0;              // the process that created it
  std::uint32_t pasid = 0;    // amdgpu: the pasid of the file's VM
};
Result<ClientRecord> load_client(const std::string& path);
Status store_client(const DrmLayout& layout, const ClientRecord& client);

// A process with a KFD context (ROCm), as its creator records it. The kernel creates the context
// at the first open of /dev/kfd and names its sysfs directory by the opener's PID in the initial
// namespace; the open file holds a reference to it (kfd_chardev.c kfd_open(): "filep now owns the
// reference"), so it outlives the process while any descriptor of that open file does. The
// simulation marks that open file description with an OFD lock on byte [lock, lock+1) of dev/kfd.
struct KfdRecord {
  pid_t pid = 0;                      // the host PID of the process that opened dev/kfd
  unsigned long long start_time = 0;  // /proc/<pid>/stat field 22, against PID reuse
  std::uint64_t lock = 0;             // the byte its open file description holds an OFD lock on
  std::uint32_t pasid = 0;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> vram;  // gpu_id, bytes
};
Result<KfdRecord> load_kfd(const std::string& path);
Status store_kfd(const DrmLayout& layout, const KfdRecord& record);

// The next lock id (1, 2, ...) for a client or a KFD open, under an flock on drm/.lock so
// concurrent clients never share one.
Result<std::uint64_t> allocate_client_id(const DrmLayout& layout);

// /proc/<pid>/stat: start time (field 22) and whether the process is a zombie; nullopt when gone.
struct ProcStat {
  unsigned long long start_time = 0;
  bool zombie = false;
};
std::optional<ProcStat> read_proc_stat(pid_t pid);
// The same from a stat file's path ("/proc/self/stat").
std::optional<ProcStat> read_proc_stat_file(const std::string& path);

}  // namespace gpusim::drm
