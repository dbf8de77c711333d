#include "watch/watch_event.hpp"

#include <unistd.h>

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

constexpr std::size_t kMaxCommandBytes = 4096;

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

std::string iso_time(double unix_time) {
  const auto seconds = static_cast<time_t>(std::floor(unix_time));
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}


}  // namespace

std::string_view watch_event_kind_name(WatchEventKind kind) { return kind == WatchEventKind::Action ? "action" : "notice"; }

std::string watch_event_json(const WatchEvent& event) {
  const Candidate& p = event.process;
  nlohmann::ordered_json process = {
      {"pid", p.pid},
      {"kind", candidate_kind_name(p.kind)},
      {"uid", p.uid},
      {"user", p.user},
      {"command", p.command.size() > kMaxCommandBytes ? p.command.substr(0, kMaxCommandBytes) : p.command},
      {"command_truncated", p.command.size() > kMaxCommandBytes},
      {"executable", p.exe},
      {"age_seconds", std::round(p.age_seconds * 10) / 10},
      {"gpus", p.gpus},
      {"gpu_memory_bytes", p.memory_bytes()},
  };
  nlohmann::ordered_json drm_gpus = nlohmann::ordered_json::array();
  for (const auto& [pci, bytes] : p.drm_memory) drm_gpus.push_back({{"pci_bus_id", pci}, {"memory_bytes", bytes}});
  process["drm_gpus"] = std::move(drm_gpus);
  process["container"] = p.container ? nlohmann::ordered_json{{"runtime", p.container->runtime},
                                                               {"id", p.container->id},
                                                               {"pod_uid", p.container->pod_uid},
                                                               {"rootless_uid", p.container->rootless_uid
                                                                                    ? nlohmann::ordered_json(*p.container->rootless_uid)
                                                                                    : nlohmann::ordered_json(nullptr)}}
                                     : nlohmann::ordered_json(nullptr);
  if (p.kind == CandidateKind::Zombie) process["parent_pid"] = p.parent;
  nlohmann::ordered_json json = {
      {"schema", "gpureap.watch.event/1"},
      {"event", watch_event_kind_name(event.kind)},
      {"time", iso_time(event.unix_time)},
      {"host", host_name()},
      {"mode", watch_mode_name(event.mode)},
      {"rule", event.rule},
      {"condition", condition_name(event.condition)},
      {"action", rule_action_name(event.action)},
  };
  if (event.kind == WatchEventKind::Notice && event.action == RuleAction::Terminate) {
    json["grace_seconds"] = event.grace_seconds;
  }
  if (event.kind == WatchEventKind::Action) {
    json["outcome"] = event.outcome;
    json["freed_bytes"] = event.freed_bytes;
  }
  json["message"] = event.message;
  json["process"] = std::move(process);
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::vector<std::string> watch_event_arguments(const WatchEvent& event) {
  std::vector<std::string> args = {
      fmt::format("event={}", watch_event_kind_name(event.kind)),
      fmt::format("rule={}", event.rule),
      fmt::format("action={}", rule_action_name(event.action)),
      fmt::format("mode={}", watch_mode_name(event.mode)),
      fmt::format("pid={}", event.process.pid),
      fmt::format("uid={}", event.process.uid),
      fmt::format("user={}", sanitize_for_terminal(event.process.user)),
  };
  if (event.kind == WatchEventKind::Action) args.push_back("outcome=" + event.outcome);
  return args;
}

}  // namespace gpureap
