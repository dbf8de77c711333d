// `gpureap ps` for the GPUs NVML does not see (AMD, Intel: the snapshot's DRM reading): a table
// section after NVIDIA's GPUs and the `drm_gpus` array of gpureap.ps/1 (docs/ps-json.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cli/ps/ps_filter.hpp"
#include "snapshot/snapshot.hpp"
#include "text/terminal_style.hpp"
#include "text/terminal_width.hpp"

namespace gpureap {

// Empty when the host has no such GPU. The filter selects GPUs (--gpu by PCI address), and
// clients, node holders and KFD processes by their processes (--pid, --user, --container).
std::string render_drm_gpus(const Snapshot& snapshot, const PsFilter& filter, const TerminalStyle& style,
                            const OutputWidth& width);

nlohmann::ordered_json drm_gpus_json(const Snapshot& snapshot, const PsFilter& filter);

}  // namespace gpureap
