#include "drm/drm_state.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/file_io.hpp"

namespace gpusim::drm {

using nlohmann::json;

namespace {

template <class Fn>
auto parse_json(const std::string& path, Fn&& convert) -> decltype(convert(json())) {
  ReadResult r = read_file(path);
  if (!r.ok()) return Error{r.error.message};
  try {
    return convert(json::parse(r.data));
  } catch (const std::exception& e) {
    return Error{path + ": " + e.what()};
  }
}

}  // namespace

Result<std::vector<DrmDevice>> load_devices(const DrmLayout& layout) {
  ReadResult r = read_file(layout.devices());
  if (!r.ok()) {
    if (r.error.missing) return std::vector<DrmDevice>{};
    return Error{r.error.message};
  }
  try {
    std::vector<DrmDevice> out;
    const json parsed = json::parse(r.data);  // kept: a range-for over a temporary's member dangles
    for (const auto& j : parsed.at("devices")) {
      DrmDevice d;
      d.pci = j.at("pci");
      d.driver = j.at("driver");
      d.vram_total = j.at("vram_total");
      d.driver_vram = j.at("driver_vram");
      d.card = j.at("card");
      d.render = j.at("render");
      d.fdinfo = j.at("fdinfo") == "legacy" ? FdinfoFormat::Legacy : FdinfoFormat::Current;
      d.kfd = j.at("kfd");
      d.gpu_id = j.at("gpu_id");
      d.xgmi_hive = j.at("xgmi_hive");
      d.release_delay_ms = j.at("release_delay_ms");
      out.push_back(std::move(d));
    }
    return out;
  } catch (const std::exception& e) {
    return Error{layout.devices() + ": " + e.what()};
  }
}

Status store_devices(const DrmLayout& layout, const std::vector<DrmDevice>& devices) {
  json list = json::array();
  for (const auto& d : devices) {
    list.push_back({{"pci", d.pci},
                    {"driver", d.driver},
                    {"vram_total", d.vram_total},
                    {"driver_vram", d.driver_vram},
                    {"card", d.card},
                    {"render", d.render},
                    {"fdinfo", d.fdinfo == FdinfoFormat::Legacy ? "legacy" : "current"},
                    {"kfd", d.kfd},
                    {"gpu_id", d.gpu_id},
                    {"xgmi_hive", d.xgmi_hive},
                    {"release_delay_ms", d.release_delay_ms}});
  }
  return write_file_atomic(layout.devices(), json{{"devices", list}}.dump(2) + "\n", 0644);
}

const DrmDevice* device_with_node(const std::vector<DrmDevice>& devices, const std::string& node) {
  for (const auto& d : devices) {
    if (d.card_node() == node || d.render_node() == node) return &d;
  }
  return nullptr;
}

Result<ClientRecord> load_client(const std::string& path) {
  return parse_json(path, [](const json& j) -> Result<ClientRecord> {
    ClientRecord c;
    c.id = j.at("id");
    c.pci = j.at("pci");
    c.node = j.at("node");
    c.vram = j.at("vram");
    c.gtt = j.at("gtt");
    c.shared = j.at("shared");
    c.busy_percent = j.at("busy_percent");
    c.start_ns = j.at("start_ns");
    c.pid = j.at("pid");
    c.pasid = j.at("pasid");
    return c;
  });
}

Status store_client(const DrmLayout& layout, const ClientRecord& c) {
  const json j = {{"id", c.id},       {"pci", c.pci},         {"node", c.node},
                  {"vram", c.vram},   {"gtt", c.gtt},         {"shared", c.shared},
                  {"busy_percent", c.busy_percent}, {"start_ns", c.start_ns}, {"pid", c.pid},
                  {"pasid", c.pasid}};
  return write_file_atomic(layout.client(c.id), j.dump() + "\n", 0644);
}

Result<KfdRecord> load_kfd(const std::string& path) {
  return parse_json(path, [](const json& j) -> Result<KfdRecord> {
    KfdRecord k;
    k.pid = j.at("pid");
    k.start_time = j.at("start_time");
    k.lock = j.at("lock");
    k.pasid = j.at("pasid");
    for (const auto& v : j.at("vram")) k.vram.emplace_back(v.at("gpu_id"), v.at("bytes"));
    return k;
  });
}

Status store_kfd(const DrmLayout& layout, const KfdRecord& k) {
  json vram = json::array();
  for (const auto& [gpu_id, bytes] : k.vram) vram.push_back({{"gpu_id", gpu_id}, {"bytes", bytes}});
  const json j = {{"pid", k.pid}, {"start_time", k.start_time}, {"lock", k.lock}, {"pasid", k.pasid}, {"vram", vram}};
  return write_file_atomic(layout.kfd_record(k.pid), j.dump() + "\n", 0644);
}

Result<std::uint64_t> allocate_client_id(const DrmLayout& layout) {
  const int lock = ::open(layout.lock().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (lock < 0) return Error{layout.lock() + ": " + errno_text(errno)};
  if (::flock(lock, LOCK_EX) != 0) {
    const int err = errno;
    ::close(lock);
    return Error{layout.lock() + ": flock: " + errno_text(err)};
  }
  // The counter is the lock file's content, rewritten in place: a rename into drm/ (01777) could
  // not replace a file another user created.
  std::uint64_t next = 1;
  char buf[32] = {};
  const ssize_t n = ::pread(lock, buf, sizeof buf - 1, 0);
  if (n > 0) {
    char* end = nullptr;
    next = std::strtoull(buf, &end, 10);
    if (end == buf || next == 0) next = 1;
  }
  const std::string text = std::to_string(next + 1) + "\n";
  const bool written = ::pwrite(lock, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()) &&
                       ::ftruncate(lock, static_cast<off_t>(text.size())) == 0;
  const int err = errno;
  ::close(lock);  // releases the flock
  if (!written) return Error{layout.lock() + ": " + errno_text(err)};
  return next;
}

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  return read_proc_stat_file("/proc/" + std::to_string(pid) + "/stat");
}

std::optional<ProcStat> read_proc_stat_file(const std::string& path) {
  ReadResult r = read_file(path);
  if (!r.ok()) return std::nullopt;
  const auto paren = r.data.rfind(')');
  if (paren == std::string::npos || paren + 2 >= r.data.size()) return std::nullopt;
  ProcStat out;
  out.zombie = r.data[paren + 2] == 'Z' || r.data[paren + 2] == 'X';
  // Fields after the comm: state is field 3, start time field 22.
  std::size_t at = paren + 2;
  for (int field = 3; field < 22 && at != std::string::npos; ++field) {
    at = r.data.find(' ', at);
    if (at != std::string::npos) ++at;
  }
  if (at == std::string::npos) return std::nullopt;
  out.start_time = std::strtoull(r.data.c_str() + at, nullptr, 10);
  return out;
}

}  // namespace gpusim::drm
