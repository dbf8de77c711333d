// gpusim status: what the simulated driver would report, plus what it knows and NVML does
// not show (orphaned, leaked and releasing allocations). Observing applies the release rules,
// exactly as an NVML call would.
#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "common/alloc_scan.hpp"
#include "common/clock.hpp"
#include "common/size.hpp"
#include "ctl/commands.hpp"
#include "ctl/ctl_common.hpp"

namespace gpusim::ctl {

namespace {

using nlohmann::json;

struct GpuMemory {
  std::uint64_t total, reserved, used, free;
};

GpuMemory gpu_memory(const Gpu& g, unsigned index, const std::vector<AllocView>& views) {
  std::uint64_t used = g.base_used + allocated_bytes(views, index);
  std::uint64_t usable = g.memory_total > g.memory_reserved ? g.memory_total - g.memory_reserved : 0;
  return {g.memory_total, g.memory_reserved, used, usable > used ? usable - used : 0};
}

json view_json(const AllocView& v) {
  const AllocRecord& r = v.rec;
  return json{{"id", r.id},
              {"gpu", r.gpu},
              {"gi", r.gi ? json(*r.gi) : json(nullptr)},
              {"ci", r.gi ? json(r.ci) : json(nullptr)},
              {"type", proc_type_letter(r.type)},
              {"bytes", r.bytes},
              {"owner_pid", r.owner_pid},
              {"owner_nspid", r.owner_nspid},
              {"owner_name", r.owner_name},
              {"state", alloc_state_name(v.state)},
              {"held", v.held},
              {"owner_alive", v.owner_alive},
              {"listed", v.listed()},
              {"leak", r.leak},
              {"release_delay_ms", r.release_delay_ms ? json(*r.release_delay_ms) : json(nullptr)},
              {"released_at_ns", v.released_at_ns ? json(*v.released_at_ns) : json(nullptr)},
              {"release_due_ns", v.release_due_ns ? json(*v.release_due_ns) : json(nullptr)},
              {"created_ns", r.created_ns}};
}

json status_json(const Layout& layout, const Config& cfg, const std::vector<AllocView>& views) {
  json gpus = json::array();
  for (unsigned i = 0; i < cfg.gpus.size(); ++i) {
    const Gpu& g = cfg.gpus[i];
    GpuMemory m = gpu_memory(g, i, views);
    json mig = json::array();
    for (const MigInstance& inst : g.mig) {
      std::uint64_t used = allocated_bytes_on_instance(views, i, inst.gi);
      mig.push_back(json{{"gi", inst.gi},
                         {"ci", inst.ci},
                         {"name", inst.name},
                         {"uuid", inst.uuid},
                         {"memory", {{"total", inst.memory_total},
                                     {"used", used},
                                     {"free", inst.memory_total > used ? inst.memory_total - used : 0}}},
                         {"cap_devices", {layout.cap_dev(inst.cap_gi_minor), layout.cap_dev(inst.cap_ci_minor)}}});
    }
    json gpu{{"index", i},
             {"name", g.name},
             {"uuid", g.uuid},
             {"pci_bus_id", g.pci_bus_id()},
             {"minor", g.minor},
             {"device", layout.gpu_dev(g.minor)},
             {"memory", {{"total", m.total}, {"reserved", m.reserved}, {"used", m.used},
                         {"free", m.free}, {"base_used", g.base_used}}},
             {"mig", mig}};
    gpu.update(gpu_knobs_json(g));
    gpus.push_back(std::move(gpu));
  }
  json allocs = json::array();
  for (const auto& v : views) {
    if (v.state != AllocState::Released) allocs.push_back(view_json(v));
  }
  json faults = json::array();
  for (const Fault& f : cfg.faults) {
    faults.push_back(json{{"call", f.call}, {"code", f.code}, {"gpu", f.gpu ? json(*f.gpu) : json(nullptr)},
                          {"hang_ms", f.hang_ms}});
  }
  return json{{"state_dir", layout.root()}, {"gpus", gpus}, {"allocations", allocs}, {"faults", faults}};
}

void print_text(const Layout& layout, const Config& cfg, const std::vector<AllocView>& views) {
  fmt::print("State: {}\n", layout.root());
  for (unsigned i = 0; i < cfg.gpus.size(); ++i) {
    const Gpu& g = cfg.gpus[i];
    GpuMemory m = gpu_memory(g, i, views);
    fmt::print("GPU {}: {} ({}, PCI {}, {})\n", i, g.name, g.uuid, g.pci_bus_id(), layout.gpu_dev(g.minor));
    fmt::print("  memory: total {}, reserved {}, used {}, free {}\n", format_size(m.total),
               format_size(m.reserved), format_size(m.used), format_size(m.free));
    std::string flags;
    if (g.lost) flags += " LOST";
    if (g.no_permission) flags += " NO_PERMISSION";
    if (g.memory_not_available) flags += " MEMORY_NOT_AVAILABLE";
    fmt::print("  {} C, {:.1f} W, util {}%/{}%, persistence {}, compute mode {}, release delay {} ms, "
               "base used {}{}\n",
               g.temperature, g.power_mw / 1000.0, g.util_gpu, g.util_mem, g.persistence ? "on" : "off",
               g.compute_mode, g.release_delay_ms, format_size(g.base_used), flags);
    for (const MigInstance& inst : g.mig) {
      fmt::print("  MIG gi {} ci {}: {} ({}), {} used of {}\n", inst.gi, inst.ci, inst.name, inst.uuid,
                 format_size(allocated_bytes_on_instance(views, i, inst.gi)), format_size(inst.memory_total));
    }
  }
  std::vector<const AllocView*> shown;
  for (const auto& v : views) {
    if (v.state != AllocState::Released) shown.push_back(&v);
  }
  if (shown.empty()) {
    fmt::print("No allocations.\n");
  } else {
    fmt::print("{:<34} {:>3} {:>3} {:>4} {:>12} {:>8} {:<10}\n", "ALLOCATION", "GPU", "GI", "TYPE",
               "SIZE", "OWNER", "STATE");
    for (const AllocView* v : shown) {
      const AllocRecord& r = v->rec;
      fmt::print("{:<34} {:>3} {:>3} {:>4} {:>12} {:>8} {:<10}\n", r.id, r.gpu,
                 r.gi ? std::to_string(*r.gi) : "-", proc_type_letter(r.type), format_size(r.bytes),
                 r.owner_pid, alloc_state_name(v->state));
    }
  }
  for (const Fault& f : cfg.faults) {
    fmt::print("Fault: {} returns {}{}{}\n", f.call, f.code, f.gpu ? fmt::format(" on GPU {}", *f.gpu) : "",
               f.hang_ms ? fmt::format(" after hanging {} ms", f.hang_ms) : "");
  }
}

}  // namespace

int run_status(const Layout& layout, bool as_json) {
  auto cfg = load_state_config(layout);
  if (!cfg.ok()) return fail(cfg.error().message);
  auto views = scan_allocations(layout, *cfg, realtime_ns());
  if (!views.ok()) return fail(views.error().message);
  if (as_json) {
    fmt::print("{}\n", status_json(layout, *cfg, *views).dump(2));
  } else {
    print_text(layout, *cfg, *views);
  }
  return 0;
}

}  // namespace gpusim::ctl
