#include "cli/watch/watch_render.hpp"

#include <cmath>

#include <fmt/format.h>

#include "text/human_format.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {


std::string names(const std::vector<NamedId>& ids) {
  std::string out;
  for (const auto& id : ids) out += fmt::format("{}{}", out.empty() ? "" : ", ", sanitize_for_terminal(id.name));
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += fmt::format("{}{}", out.empty() ? "" : ", ", sanitize_for_terminal(item));
  return out;
}

// Parts already made safe above.
std::string listed(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) out += fmt::format("{}{}", out.empty() ? "" : "; ", part);
  return out;
}

std::string gpus(const std::vector<GpuRef>& refs) {
  std::string out;
  for (const auto& r : refs) {
    const std::string name = r.index ? std::to_string(*r.index) : !r.pci.empty() ? r.pci : sanitize_for_terminal(r.uuid);
    out += fmt::format("{}{}", out.empty() ? "" : ", ", name);
  }
  return out;
}

std::string exclusion(const ProcessExclusion& e) {
  std::vector<std::string> parts;
  if (!e.users.empty()) parts.push_back("users " + names(e.users));
  if (!e.groups.empty()) parts.push_back("groups " + names(e.groups));
  if (!e.executables.empty()) parts.push_back("executables " + joined(e.executables));
  if (!e.containers.empty()) parts.push_back("containers " + joined(e.containers));
  return listed(parts);
}

std::string condition(const Rule& r) {
  switch (r.condition) {
    case Condition::Idle:
      return fmt::format("idle for {} (SM utilisation <= {}%, CPU <= {}% of a core)", format_short_duration(r.idle_seconds),
                         r.max_sm_util_percent, r.max_cpu_percent);
    case Condition::OverAge: return fmt::format("running longer than {}", format_short_duration(r.older_than_seconds));
    case Condition::Memory: return fmt::format("GPU memory above {}", format_bytes(r.memory_above_bytes));
    case Condition::Orphan: return "orphaned holder of a job that is over";
    case Condition::Zombie: return "unreaped zombie of a GPU process";
  }
  return "";
}

std::string action(const Rule& r, WatchMode mode) {
  switch (r.action) {
    case RuleAction::Log: return "log";
    case RuleAction::Notify: return "notify";
    case RuleAction::Terminate: {
      const std::string what = r.condition == Condition::Zombie ? "remind its parent (SIGCHLD)" : "terminate";
      return fmt::format("notify, then {} after {} grace{}", what, format_short_duration(r.grace_seconds),
                         mode == WatchMode::DryRun ? " (dry run: logged, not taken)" : "");
    }
  }
  return "";
}

}  // namespace

std::string render_policy_summary(const Policy& p) {
  std::string out = fmt::format("{}: valid, {} rule{}\n", sanitize_for_terminal(p.source), p.rules.size(),
                                p.rules.size() == 1 ? "" : "s");
  out += fmt::format("mode: {}\n", p.mode == WatchMode::Enforce ? "enforce (ends processes)"
                                                                 : "dry-run (logs and notifies; ends nothing)");
  out += fmt::format("looks every {}, all of /proc at least every {}\n", format_short_duration(p.interval_seconds),
                     format_short_duration(p.full_scan_seconds));
  out += fmt::format("terminations: at most {} per {}; SIGTERM, SIGKILL after {}; memory verified within {}\n",
                     p.max_terminations, format_short_duration(p.cap_window()), format_short_duration(p.kill_timeout_seconds),
                     format_short_duration(p.verify_timeout_seconds));
  if (!p.audit_log.empty()) out += fmt::format("audit log: {}\n", sanitize_for_terminal(p.audit_log));
  if (!p.notify.command.empty()) {
    out += fmt::format("notify command: {} (timeout {})\n", joined(p.notify.command), format_short_duration(p.notify.command_timeout_seconds));
  }
  if (!p.notify.webhook.empty()) {
    out += fmt::format("webhook: {} (timeout {})\n", sanitize_for_terminal(p.notify.webhook),
                       format_short_duration(p.notify.webhook_timeout_seconds));
    if (!p.notify.webhook_ca_file.empty()) out += fmt::format("webhook CA: {}\n", sanitize_for_terminal(p.notify.webhook_ca_file));
  }
  if (!p.exclude.empty()) out += fmt::format("never touched: {}\n", exclusion(p.exclude));
  for (const Rule& r : p.rules) {
    out += fmt::format("rule {}: {} -> {}\n", r.name, condition(r), action(r, p.mode));
    std::vector<std::string> match;
    if (!r.match.users.empty()) match.push_back("users " + names(r.match.users));
    if (!r.match.groups.empty()) match.push_back("groups " + names(r.match.groups));
    if (r.match.command) match.push_back("command /" + sanitize_for_terminal(r.match.command_text) + "/");
    if (!r.match.gpus.empty()) match.push_back("GPUs " + gpus(r.match.gpus));
    if (!r.match.containers.empty()) match.push_back("containers " + joined(r.match.containers));
    if (r.match.min_memory) match.push_back("at least " + format_bytes(*r.match.min_memory));
    out += fmt::format("  matches: {}\n", match.empty() ? "every process" : listed(match));
    if (!r.except.empty()) out += fmt::format("  except: {}\n", exclusion(r.except));
  }
  return out;
}

}  // namespace gpureap
