#include "cli/fleet/fleet_json.hpp"

#include <algorithm>
#include <charconv>

#include <nlohmann/json.hpp>

#include "cli/fleet/fleet_render.hpp"
#include "cli/common/json_value.hpp"

namespace gpureap {
namespace {

using nlohmann::ordered_json;

// A label that holds a number ("1234") as that number; null otherwise (a label is any text).
ordered_json number_or_null(const std::string& text) {
  unsigned long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return nullptr;
  return value;
}

ordered_json empty_as_null(const std::string& text) { return text.empty() ? ordered_json(nullptr) : ordered_json(text); }

ordered_json xid_json(const std::optional<FleetXid>& xid, double now) {
  if (!xid) return nullptr;
  const auto info = fleet_xid_info(*xid);
  return {{"xid", number_or_null(xid->xid)},
          {"label", xid->xid},
          {"timestamp", xid->timestamp},
          {"age_s", std::max(0.0, now - xid->timestamp)},
          {"meaning", info ? ordered_json(info->meaning) : ordered_json(nullptr)},
          {"action", info ? ordered_json(std::string(xid_action_name(info->action))) : ordered_json(nullptr)},
          {"severity", info ? ordered_json(std::string(severity_name(xid_severity(info->action)))) : ordered_json(nullptr)}};
}

ordered_json gpu_json(const FleetGpu& gpu, double now) {
  ordered_json processes = ordered_json::array();
  for (const auto& p : gpu.top_processes) {
    processes.push_back({{"pid", number_or_null(p.pid)},
                         {"user", empty_as_null(p.user)},
                         {"container", empty_as_null(p.container)},
                         {"command", p.command},
                         {"bytes", p.bytes}});
  }
  ordered_json users = ordered_json::array();
  for (const auto& u : gpu.top_users) users.push_back({{"user", u.user}, {"bytes", u.bytes}});
  ordered_json containers = ordered_json::array();
  for (const auto& c : gpu.top_containers) {
    containers.push_back({{"runtime", empty_as_null(c.runtime)},
                          {"container", empty_as_null(c.container)},
                          {"pod_uid", empty_as_null(c.pod_uid)},
                          {"bytes", c.bytes}});
  }
  return {{"gpu", gpu.index},
          {"uuid", empty_as_null(gpu.uuid)},
          {"name", empty_as_null(gpu.name)},
          {"lost", gpu.lost_unknown ? nlohmann::json(nullptr) : nlohmann::json(gpu.lost)},
          {"memory",
           {{"total_bytes", optional_value(gpu.total_bytes)},
            {"used_bytes", optional_value(gpu.used_bytes)},
            {"reserved_bytes", optional_value(gpu.reserved_bytes)},
            {"unattributed_bytes", optional_value(gpu.unattributed_bytes)}}},
          {"orphaned_holders", optional_value(gpu.orphaned_holders)},
          {"orphaned_memory_bytes", optional_value(gpu.orphaned_memory_bytes)},
          {"top_processes", std::move(processes)},
          {"top_users", std::move(users)},
          {"top_containers", std::move(containers)},
          {"last_xid", xid_json(gpu.last_xid, now)}};
}

std::string scrape_name(ScrapeState state) {
  switch (state) {
    case ScrapeState::Up: return "up";
    case ScrapeState::Down: return "down";
    case ScrapeState::Unknown: return "unknown";
  }
  return "unknown";
}

}  // namespace

ordered_json fleet_json(const FleetView& view, std::string_view source, int exit_code) {
  ordered_json hosts = ordered_json::array();
  for (const auto& host : view.hosts) {
    ordered_json gpus = ordered_json::array();
    for (const auto& gpu : host.gpus) gpus.push_back(gpu_json(gpu, view.evaluated_at));
    hosts.push_back({{"instance", host.instance},
                     {"scrape", scrape_name(host.scrape)},
                     {"driver_up", optional_value(host.driver_up)},
                     {"xid_without_gpu", xid_json(host.host_xid, view.evaluated_at)},
                     {"gpus", std::move(gpus)}});
  }
  return {{"schema", "gpureap.fleet/1"},
          {"prometheus", std::string(source)},
          {"evaluated_at", view.evaluated_at},
          {"hosts", std::move(hosts)},
          {"warnings", view.warnings},
          {"exit_code", exit_code}};
}

}  // namespace gpureap
