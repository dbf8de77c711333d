#include "cli/fleet/fleet_render.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "text/human_format.hpp"
#include "text/sanitize.hpp"
#include "text/truncate.hpp"

namespace gpureap {
namespace {

constexpr std::size_t kMaxHostColumn = 40;
constexpr double kMemoryAlertShare = 0.95;  // GpureapGpuMemoryFull in gpureap-alerts.yml
constexpr double kMemoryNoticeShare = 0.80;

struct Columns {
  std::size_t host = 4;
};

std::string dash_if_empty(std::string_view text) { return text.empty() ? "-" : std::string(text); }

std::string xid_cell(const std::optional<FleetXid>& xid, double now, const TerminalStyle& style) {
  if (!xid) return "-";
  std::string text = "Xid " + sanitize_for_terminal(xid->xid);
  const auto info = fleet_xid_info(*xid);
  if (info) text += " " + info->meaning;
  text += " · " + format_duration(std::max(0.0, now - xid->timestamp)) + " ago";
  if (info && xid_severity(info->action) == Severity::Critical) return style.red(text);
  return text;
}

std::string memory_cells(const FleetGpu& gpu, const TerminalStyle& style) {
  const std::string used = format_bytes(gpu.used_bytes);
  const std::string total = format_bytes(gpu.total_bytes);
  std::string share = "?";
  if (gpu.used_bytes && gpu.total_bytes && *gpu.total_bytes > 0) {
    const double ratio = static_cast<double>(*gpu.used_bytes) / static_cast<double>(*gpu.total_bytes);
    share = fmt::format("{:.0f}%", 100 * ratio);
    share = fmt::format("{:>4}", share);
    if (ratio >= kMemoryAlertShare) share = style.red(share);
    else if (ratio >= kMemoryNoticeShare) share = style.yellow(share);
  } else {
    share = fmt::format("{:>4}", share);
  }
  return fmt::format("{:>10} {:>10} {}", used, total, share);
}

std::string unattributed_cell(const FleetGpu& gpu, const TerminalStyle& style) {
  const std::string text = fmt::format("{:<12}", format_bytes(gpu.unattributed_bytes));
  if (gpu.unattributed_bytes && *gpu.unattributed_bytes >= kFleetUnattributedNoticeBytes) return style.yellow(text);
  return text;
}

std::string orphan_cell(const FleetGpu& gpu, const TerminalStyle& style) {
  if (!gpu.orphaned_holders) return fmt::format("{:<14}", "?");
  if (*gpu.orphaned_holders == 0) return fmt::format("{:<14}", "0");
  std::string text = std::to_string(*gpu.orphaned_holders);
  if (gpu.orphaned_memory_bytes) text += " (" + format_bytes(*gpu.orphaned_memory_bytes) + ")";
  return style.red(fmt::format("{:<14}", text));
}

// The holder lines under a GPU row, indented to the GPU column.
std::string holder_lines(const FleetGpu& gpu, const std::string& indent, const OutputWidth& width) {
  std::string out;
  for (const auto& p : gpu.top_processes) {
    const std::string start = fmt::format("{}  {:>10}  {} pid {} {} ", indent, format_bytes(p.bytes),
                                          fixed_cell(dash_if_empty(p.user), 12), fixed_cell(dash_if_empty(p.pid), 8),
                                          fixed_cell(dash_if_empty(p.container), 20));
    out += start + width.rest_of_line(dash_if_empty(p.command), start) + "\n";
  }
  if (!gpu.top_processes.empty()) return out;
  // Without per-process series (the exporter's opt-in), the per-user and per-container sums.
  for (const auto& u : gpu.top_users) {
    const std::string start = fmt::format("{}  {:>10}  user ", indent, format_bytes(u.bytes));
    out += start + width.rest_of_line(dash_if_empty(u.user), start) + "\n";
  }
  for (const auto& c : gpu.top_containers) {
    std::string name = c.container.empty() ? "pod " + c.pod_uid : c.container;
    if (!c.runtime.empty()) name = c.runtime + ":" + name;
    const std::string start = fmt::format("{}  {:>10}  container ", indent, format_bytes(c.bytes));
    out += start + width.rest_of_line(name, start) + "\n";
  }
  return out;
}

std::string host_status(const FleetHost& host, const TerminalStyle& style) {
  if (host.scrape == ScrapeState::Down) {
    return style.red("down") + ": Prometheus cannot scrape its exporter (up = 0); its GPUs are not known now";
  }
  if (host.driver_up && !*host.driver_up) {
    return style.red("no driver") + ": the exporter runs, but the NVIDIA library did not load (gpureap_driver_up = 0)";
  }
  if (host.gpus.empty()) return "no GPU series";
  return {};
}

}  // namespace

std::optional<XidInfo> fleet_xid_info(const FleetXid& xid) {
  unsigned number = 0;
  const auto& text = xid.xid;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end != text.data() + text.size() || number == 0 || number > kMaxXid) return std::nullopt;
  XidEvent event;
  event.xid = number;
  return describe_xid(event);
}

bool fleet_has_trouble(const FleetView& view) {
  return std::any_of(view.hosts.begin(), view.hosts.end(), [](const FleetHost& host) {
    return host.scrape == ScrapeState::Down || (host.driver_up && !*host.driver_up) ||
           std::any_of(host.gpus.begin(), host.gpus.end(), [](const FleetGpu& gpu) { return gpu.lost; });
  });
}

std::string render_fleet_table(const FleetView& view, std::string_view source, const TerminalStyle& style,
                               const OutputWidth& width) {
  std::size_t gpu_count = 0;
  Columns columns;
  bool any_process_series = false;
  for (const auto& host : view.hosts) {
    gpu_count += host.gpus.size();
    columns.host = std::max(columns.host, std::min(kMaxHostColumn, display_width(sanitize_for_terminal(host.instance))));
    for (const auto& gpu : host.gpus) any_process_series = any_process_series || !gpu.top_processes.empty();
  }
  const auto when = fmt::localtime(static_cast<std::time_t>(view.evaluated_at));
  std::string out = style.bold("gpureap fleet") +
                    fmt::format(" · {} · {} host{}, {} GPU{} · {:%Y-%m-%d %H:%M:%S}\n", sanitize_for_terminal(source),
                                view.hosts.size(), view.hosts.size() == 1 ? "" : "s", gpu_count,
                                gpu_count == 1 ? "" : "s", when);
  for (const auto& warning : view.warnings) out += style.yellow("warning: " + sanitize_for_terminal(warning)) + "\n";
  out += style.bold(fmt::format("{} {:<4} {:>10} {:>10} {:>4} {:<12} {:<14} {}", pad_to_width("HOST", columns.host),
                                "GPU", "USED", "TOTAL", "USE", "UNATTRIBUTED", "ORPHANED", "LAST XID")) +
         "\n";
  const std::string indent(columns.host + 1, ' ');
  for (const auto& host : view.hosts) {
    const std::string host_cell = fixed_cell(dash_if_empty(host.instance), columns.host);
    const std::string status = host_status(host, style);
    if (!status.empty()) out += host_cell + " " + status + "\n";
    if (host.host_xid) {
      out += (status.empty() ? host_cell : indent.substr(1)) + " " + xid_cell(host.host_xid, view.evaluated_at, style) +
             " (not tied to a GPU)\n";
    }
    bool first = status.empty() && !host.host_xid;
    for (const auto& gpu : host.gpus) {
      std::string row = (first ? host_cell : std::string(columns.host, ' ')) + " " +
                        fmt::format("{:<4} ", fixed_cell(dash_if_empty(gpu.index), 4));
      first = false;
      if (gpu.lost) {
        row += style.red("lost: the driver cannot reach this GPU (gpureap_gpu_lost = 1)");
      } else {
        row += memory_cells(gpu, style) + " " + unattributed_cell(gpu, style) + " " + orphan_cell(gpu, style) + " " +
               xid_cell(gpu.last_xid, view.evaluated_at, style);
      }
      out += row + "\n" + holder_lines(gpu, indent, width);
    }
  }
  if (!any_process_series && gpu_count > 0) {
    out += style.dim("Holders are per user and container: per-process series need `gpureap export --per-process`.") + "\n";
  }
  return out;
}

}  // namespace gpureap
