#include "cli/reap/reap_render.hpp"

#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/json_value.hpp"
#include "cli/kill/kill_render.hpp"
#include "text/human_format.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

using Json = nlohmann::ordered_json;

}  // namespace

int reap_exit_status(const ReapReport& report, int driver_failure_code) {
  switch (reap_verdict(report)) {
    case ReapVerdict::Interrupted: return exit_code::interrupted_by(report.kill.interrupted_by);
    case ReapVerdict::Remains: return exit_code::kNotFreed;
    case ReapVerdict::PermissionDenied: return exit_code::kPermissionDenied;
    case ReapVerdict::Refused: return exit_code::kRefused;
    case ReapVerdict::DriverUnreadable: return driver_failure_code;
    case ReapVerdict::Ok: return exit_code::kOk;
  }
  return exit_code::kInternalError;
}

std::string render_reap_outcome(const ReapReport& report, const TerminalStyle& style) {
  std::string out;
  for (const auto& s : report.spared) {
    out += fmt::format("  {:>7}  spared ({}): {}\n", s.pid, sanitize_for_terminal(s.reason), sanitize_for_terminal(s.command));
  }
  for (const auto& g : report.gpus) {
    if (g.verified) {
      out += style.green(fmt::format("  GPU {}: back to baseline ({} used, {} of it outside the job; baseline {}), "
                                     "verified in {:.0f} ms",
                                     g.index, format_bytes(g.used_bytes.value_or(0)), format_bytes(g.outside_bytes),
                                     format_bytes(g.baseline_bytes), g.verify_ms.value_or(0))) +
             "\n";
    } else {
      out += style.red("  " + sanitize_for_terminal(g.message)) + "\n";
    }
  }
  for (const auto& s : report.survivors) {
    std::string state(1, s.state);
    if (s.state == 'D' && !s.wchan.empty()) state += " (wchan " + sanitize_for_terminal(s.wchan) + ")";
    out += style.red(fmt::format("  survivor PID {} ({}): state {}: {}", s.pid, sanitize_for_terminal(s.command), state,
                                 sanitize_for_terminal(s.why))) +
           "\n";
  }
  return out;
}

Json reap_report_json(const KillPlan& plan, const ReapReport& report, int exit_status) {
  const Json kill = kill_report_json(plan, report.kill);
  Json out;
  out["schema"] = kReapSchema;
  out["dry_run"] = report.kill.settings.dry_run;
  Json criteria;
  criteria["cgroup"] = optional_value(report.criteria.cgroup_dir);
  criteria["uids"] = report.criteria.uids ? Json(*report.criteria.uids) : Json(nullptr);
  criteria["gpus"] = report.criteria.gpus ? Json(*report.criteria.gpus) : Json(nullptr);
  criteria["drm_gpus"] = report.criteria.drm_gpus ? Json(*report.criteria.drm_gpus) : Json(nullptr);
  criteria["except"] = report.criteria.except;
  out["criteria"] = criteria;
  out["kill_timeout_s"] = report.kill.settings.timeout_s;
  out["verify_timeout_s"] = report.verify_timeout_s;
  out["targets"] = kill["targets"];
  Json spared = Json::array();
  for (const auto& s : report.spared) spared.push_back(Json{{"pid", s.pid}, {"command", s.command}, {"reason", s.reason}});
  out["spared"] = spared;
  Json gpus = Json::array();
  for (const auto& g : report.gpus) {
    Json j;
    j["index"] = g.index;
    j["verified"] = g.verified;
    j["verify_ms"] = optional_value(g.verify_ms);
    j["used_bytes"] = optional_value(g.used_bytes);
    j["outside_bytes"] = g.outside_bytes;
    j["baseline_bytes"] = g.baseline_bytes;
    j["still_listed"] = g.still_listed;
    j["message"] = g.message.empty() ? Json(nullptr) : Json(g.message);
    gpus.push_back(std::move(j));
  }
  out["gpus"] = gpus;
  out["drm_gpus"] = kill["drm_gpus"];
  Json survivors = Json::array();
  for (const auto& s : report.survivors) {
    survivors.push_back(Json{{"pid", s.pid},
                             {"state", std::string(1, s.state)},
                             {"wchan", s.wchan.empty() ? Json(nullptr) : Json(s.wchan)},
                             {"command", s.command},
                             {"why", s.why}});
  }
  out["survivors"] = survivors;
  out["notes"] = report.kill.notes;
  out["exit_code"] = exit_status;
  return out;
}

}  // namespace gpureap
