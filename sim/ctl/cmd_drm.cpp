// `gpusim drm-add` and `gpusim drm-driver`: the simulated DRM (AMD and Intel) GPUs
// (sim/drm/, docs/simulator.md).
#include <fmt/core.h>

#include "common/size.hpp"
#include "ctl/commands.hpp"
#include "ctl/ctl_common.hpp"
#include "drm/device_tree.hpp"
#include "drm/driver_loop.hpp"

namespace gpusim::ctl {

int run_drm_add(const Layout& layout, const DrmAddOptions& opts) {
  drm::DrmDevice device;
  device.pci = opts.pci;
  device.driver = opts.driver;
  auto vram = parse_size(opts.vram);
  if (!vram.ok()) return fail("--vram " + opts.vram + ": " + vram.error().message);
  auto driver_vram = parse_size(opts.driver_vram);
  if (!driver_vram.ok()) return fail("--driver-vram " + opts.driver_vram + ": " + driver_vram.error().message);
  device.vram_total = *vram;
  device.driver_vram = *driver_vram;
  device.card = opts.card;
  device.render = opts.render;
  if (opts.fdinfo != "current" && opts.fdinfo != "legacy") return fail("--fdinfo is current or legacy");
  device.fdinfo = opts.fdinfo == "legacy" ? drm::FdinfoFormat::Legacy : drm::FdinfoFormat::Current;
  device.kfd = opts.kfd;
  device.xgmi_hive = opts.xgmi_hive;
  device.release_delay_ms = opts.release_delay_ms;
  if (auto st = drm::add_device(drm::DrmLayout(layout.root()), device); !st.ok()) return fail(st.error().message);
  return 0;
}

int run_drm_driver(const Layout& layout, unsigned period_ms) {
  return drm::run_driver(drm::DrmLayout(layout.root()), period_ms);
}

}  // namespace gpusim::ctl
