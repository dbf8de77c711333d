#include "drm/device_tree.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/core.h>

#include "common/file_io.hpp"

namespace gpusim::drm {
namespace fs = std::filesystem;

namespace {

Status mkdirs(const std::string& path, unsigned mode = 0755) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Error{path + ": " + ec.message()};
  if (::chmod(path.c_str(), mode) != 0) return Error{path + ": chmod: " + errno_text(errno)};
  return ok_status();
}

Status put(const std::string& path, const std::string& text) {
  if (auto st = mkdirs(fs::path(path).parent_path().string()); !st.ok()) return st;
  return write_file_atomic(path, text, 0444);
}

Status link_to(const std::string& target, const std::string& link) {
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_symlink(target, link, ec);
  if (ec) return Error{link + ": symlink: " + ec.message()};
  return ok_status();
}

bool valid_pci(const std::string& pci) {
  if (pci.size() != 12 || pci[4] != ':' || pci[7] != ':' || pci[10] != '.') return false;
  for (std::size_t i = 0; i < pci.size(); ++i) {
    if (i == 4 || i == 7 || i == 10) continue;
    if (!std::isxdigit(static_cast<unsigned char>(pci[i])) || std::isupper(static_cast<unsigned char>(pci[i]))) return false;
  }
  return pci[11] <= '7';
}

// kfd_topology.c makes gpu_id a 16-bit hash of the device's properties (never 0); here of the
// PCI address, so it is stable across runs.
std::uint32_t gpu_id_for(const std::string& pci) {
  std::uint32_t h = 2166136261u;
  for (char c : pci) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  const std::uint32_t id = h & 0xffff;
  return id == 0 ? 1 : id;
}

unsigned field(const std::string& pci, std::size_t at, std::size_t len) {
  return static_cast<unsigned>(std::stoul(pci.substr(at, len), nullptr, 16));
}

// A device file under dev/ (created once: clients' locks are on its inode) and the driver's hard
// link to it under drm/nodes/, through which it tests their locks.
Status device_file(const std::string& dev, const std::string& link) {
  if (auto st = touch_file(dev, 0666); !st.ok()) return st;
  std::error_code ec;
  fs::remove(link, ec);
  if (::link(dev.c_str(), link.c_str()) != 0) return Error{link + ": link: " + errno_text(errno)};
  return ok_status();
}

Status node_tree(const DrmLayout& layout, const DrmDevice& d, const std::string& node, unsigned minor) {
  const std::string dir = layout.sys_device(d.pci) + "/drm/" + node;
  if (auto st = put(dir + "/dev", fmt::format("226:{}\n", minor)); !st.ok()) return st;
  if (auto st = put(dir + "/uevent", fmt::format("MAJOR=226\nMINOR={}\nDEVNAME=dri/{}\nDEVTYPE=drm_minor\n", minor, node));
      !st.ok()) {
    return st;
  }
  if (auto st = link_to("../..", dir + "/device"); !st.ok()) return st;
  if (auto st = mkdirs(layout.sys() + "/class/drm"); !st.ok()) return st;
  if (auto st = link_to("../../devices/" + d.pci + "/drm/" + node, layout.sys() + "/class/drm/" + node); !st.ok()) {
    return st;
  }
  return device_file(layout.dri_node(node), layout.node_link(node));
}

Status kfd_tree(const DrmLayout& layout, const DrmDevice& d, std::size_t gpu_nodes_before) {
  const std::string topology = layout.kfd_sys() + "/topology";
  if (auto st = put(topology + "/generation_id", "1\n"); !st.ok()) return st;
  if (auto st = put(topology + "/system_properties", "platform_oem 0\nplatform_id 0\nplatform_rev 0\n"); !st.ok()) {
    return st;
  }
  const std::string cpu = topology + "/nodes/0";
  if (!fs::exists(cpu + "/gpu_id")) {
    if (auto st = put(cpu + "/gpu_id", "0\n"); !st.ok()) return st;
    if (auto st = put(cpu + "/name", "\n"); !st.ok()) return st;
    if (auto st = put(cpu + "/properties", "cpu_cores_count 16\nsimd_count 0\nmem_banks_count 1\n"); !st.ok()) {
      return st;
    }
  }
  const std::string dir = topology + "/nodes/" + std::to_string(gpu_nodes_before + 1);
  // kfd_topology.c node_show(): "<name> <value>" lines; location_id = bus << 8 | devfn.
  const unsigned bus = field(d.pci, 5, 2), dev = field(d.pci, 8, 2), fn = field(d.pci, 11, 1);
  std::string hive = "0";
  if (!d.xgmi_hive.empty()) hive = std::to_string(std::stoull(d.xgmi_hive, nullptr, 16));
  const std::string properties = fmt::format(
      "cpu_cores_count 0\nsimd_count 304\nmem_banks_count 1\ncaches_count 0\nio_links_count 1\n"
      "p2p_links_count 0\ncpu_core_id_base 0\nsimd_id_base 2147487744\nmax_waves_per_simd 8\n"
      "lds_size_in_kb 64\ngds_size_in_kb 0\nnum_gws 64\nwave_front_size 64\narray_count 8\n"
      "simd_arrays_per_engine 1\ncu_per_simd_array 10\nsimd_per_cu 4\nmax_slots_scratch_cu 32\n"
      "gfx_target_version 90402\nvendor_id 4098\ndevice_id 29857\nlocation_id {}\ndomain {}\n"
      "drm_render_minor {}\nhive_id {}\nnum_sdma_engines 2\nnum_sdma_xgmi_engines 6\n"
      "num_sdma_queues_per_engine 8\nnum_cp_queues 24\nmax_engine_clk_fcompute 2100\nlocal_mem_size 0\n"
      "fw_version 160\ncapability 1012113536\ndebug_prop 0\nsdma_fw_version 19\nunique_id {}\nnum_xcc 1\n"
      "max_engine_clk_ccompute 2100\n",
      bus << 8 | dev << 3 | fn, field(d.pci, 0, 4), d.render, hive, d.gpu_id);
  if (auto st = put(dir + "/gpu_id", fmt::format("{}\n", d.gpu_id)); !st.ok()) return st;
  if (auto st = put(dir + "/name", "gfx942\n"); !st.ok()) return st;
  if (auto st = put(dir + "/properties", properties); !st.ok()) return st;
  if (auto st = mkdirs(layout.kfd_sys() + "/proc"); !st.ok()) return st;
  return device_file(layout.kfd_dev(), layout.kfd_link());
}

Status xgmi_tree(const DrmLayout& layout, const DrmDevice& d, const std::vector<DrmDevice>& before) {
  const std::string dir = layout.sys_device(d.pci);
  std::vector<const DrmDevice*> hive;
  for (const auto& other : before) {
    if (other.xgmi_hive == d.xgmi_hive) hive.push_back(&other);
  }
  if (auto st = put(dir + "/xgmi_device_id", fmt::format("{}\n", 0x1000 + d.gpu_id + hive.size())); !st.ok()) {
    return st;
  }
  if (auto st = put(dir + "/xgmi_physical_id", fmt::format("{}\n", hive.size())); !st.ok()) return st;
  std::string hive_dir;
  if (hive.empty()) {
    hive_dir = dir + "/xgmi_hive_info";
    if (auto st = put(hive_dir + "/xgmi_hive_id", std::to_string(std::stoull(d.xgmi_hive, nullptr, 16)) + "\n");
        !st.ok()) {
      return st;
    }
  } else {
    hive_dir = layout.sys_device(hive.front()->pci) + "/xgmi_hive_info";
    if (auto st = link_to("../" + hive.front()->pci + "/xgmi_hive_info", dir + "/xgmi_hive_info"); !st.ok()) return st;
  }
  return link_to("../../" + d.pci, hive_dir + "/node" + std::to_string(hive.size() + 1));
}

}  // namespace

bool write_if_changed(const std::string& path, const std::string& text, unsigned mode) {
  if (ReadResult r = read_file(path); r.ok() && r.data == text) return false;
  return write_file_atomic(path, text, mode).ok();
}

Status add_device(const DrmLayout& layout, DrmDevice d) {
  if (!valid_pci(d.pci)) return Error{"--pci " + d.pci + ": not a PCI address such as 0000:03:00.0 (lower-case hex)"};
  if (d.driver != "amdgpu" && d.driver != "i915" && d.driver != "xe") {
    return Error{"--driver " + d.driver + ": the simulator has amdgpu, i915 and xe"};
  }
  if (d.driver != "amdgpu" && (d.fdinfo == FdinfoFormat::Legacy || d.kfd || !d.xgmi_hive.empty())) {
    return Error{"--fdinfo legacy, --kfd and --xgmi-hive are amdgpu's"};
  }
  if (!d.xgmi_hive.empty() && d.xgmi_hive.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    return Error{"--xgmi-hive " + d.xgmi_hive + ": not a hex number"};
  }
  for (const char* dir : {"", "/clients", "/kfd"}) {
    // Clients of any user take ids and write their records; the sticky bit keeps each user's
    // records theirs (no other user can replace or remove them).
    if (auto st = mkdirs(layout.dir() + dir, 01777); !st.ok()) return st;
  }
  if (auto st = mkdirs(layout.nodes_dir()); !st.ok()) return st;
  if (auto st = mkdirs(layout.dri_dir()); !st.ok()) return st;
  if (auto st = mkdirs(layout.fdinfo_root()); !st.ok()) return st;
  if (auto st = touch_file(layout.lock(), 0666); !st.ok()) return st;
  const int lock = ::open(layout.lock().c_str(), O_RDWR | O_CLOEXEC);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
    if (lock >= 0) ::close(lock);
    return Error{layout.lock() + ": " + errno_text(errno)};
  }
  Status result = [&]() -> Status {
    auto devices = load_devices(layout);
    if (!devices.ok()) return devices.error();
    for (const auto& other : *devices) {
      if (other.pci == d.pci) return Error{"a device at " + d.pci + " was added already"};
      if (other.card == d.card || other.render == d.render) {
        return Error{fmt::format("card{} or renderD{} belongs to {} already", d.card, d.render, other.pci)};
      }
    }
    const std::size_t kfd_before =
        static_cast<std::size_t>(std::count_if(devices->begin(), devices->end(), [](const DrmDevice& o) { return o.kfd; }));
    if (d.kfd) d.gpu_id = gpu_id_for(d.pci);
    const std::string dir = layout.sys_device(d.pci);
    const std::string device_id = d.driver == "amdgpu" ? "0x74a1" : (d.driver == "xe" ? "0xe20b" : "0x56a0");
    const std::string uevent = fmt::format("DRIVER={}\nPCI_CLASS=30000\nPCI_ID={:04X}:{}\nPCI_SLOT_NAME={}\n",
                                           d.driver, d.vendor_id(), device_id.substr(2), d.pci);
    if (auto st = put(dir + "/uevent", uevent); !st.ok()) return st;
    if (auto st = put(dir + "/vendor", fmt::format("0x{:04x}\n", d.vendor_id())); !st.ok()) return st;
    if (auto st = put(dir + "/device", device_id + "\n"); !st.ok()) return st;
    if (d.driver == "amdgpu") {
      if (auto st = put(dir + "/mem_info_vram_total", fmt::format("{}\n", d.vram_total)); !st.ok()) return st;
      if (auto st = put(dir + "/mem_info_vram_used", fmt::format("{}\n", d.driver_vram)); !st.ok()) return st;
    }
    if (auto st = node_tree(layout, d, d.card_node(), d.card); !st.ok()) return st;
    if (auto st = node_tree(layout, d, d.render_node(), d.render); !st.ok()) return st;
    if (!d.xgmi_hive.empty()) {
      if (auto st = xgmi_tree(layout, d, *devices); !st.ok()) return st;
    }
    if (d.kfd) {
      if (auto st = kfd_tree(layout, d, kfd_before); !st.ok()) return st;
    }
    devices->push_back(d);
    return store_devices(layout, *devices);
  }();
  ::close(lock);
  return result;
}

}  // namespace gpusim::drm
