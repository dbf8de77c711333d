// `gpureap fleet` for people: one block per host, one row per GPU (memory used of total,
// what no process explains, orphaned holders, the last Xid), the biggest holders under it.
// Every label value is sanitised and cut to its column here: they come from the scraped hosts.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "doctor/xid_catalog.hpp"
#include "fleet/fleet_view.hpp"
#include "text/terminal_style.hpp"
#include "text/terminal_width.hpp"

namespace gpureap {

// Unattributed memory at or above this is called out (yellow): the same threshold as the
// GpureapUnattributedMemory alert in deploy/prometheus/gpureap-alerts.yml.
inline constexpr std::uint64_t kFleetUnattributedNoticeBytes = 1ull << 30;

std::string render_fleet_table(const FleetView& view, std::string_view source, const TerminalStyle& style,
                               const OutputWidth& width);

// What the doctor's catalog says of the Xid in the label; nullopt when the label is not an Xid
// number (1 to kMaxXid).
std::optional<XidInfo> fleet_xid_info(const FleetXid& xid);

// A host that is down, whose driver did not load, or with a lost GPU: `fleet` exits 5.
bool fleet_has_trouble(const FleetView& view);

}  // namespace gpureap
