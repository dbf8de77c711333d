#include "cli/kill/kill_render.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "text/human_format.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

using Json = nlohmann::ordered_json;

const PlannedTarget* planned_for(const KillPlan& plan, pid_t pid) {
  for (const auto& t : plan.targets) {
    if (t.pid == pid) return &t;
  }
  return nullptr;
}

// "03:00.0 2.0 GiB": a DRM GPU by its bus address without the PCI domain, which the column
// has no room for (the plan's GPU lines give it whole).
std::string drm_memory_text(const PlannedTarget& t) {
  std::string text;
  for (const auto& [pci, bytes] : t.drm_memory) {
    const std::string bus = pci.size() > 5 && pci.compare(0, 5, "0000:") == 0 ? pci.substr(5) : pci;
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ", bus, format_bytes(bytes));
  }
  return text;
}

std::string memory_text(const PlannedTarget& t) {
  if (t.gpu_memory.empty()) {
    if (t.holds_gpus.empty()) return t.drm_memory.empty() ? "-" : drm_memory_text(t);
    std::string gpus;
    for (unsigned g : t.holds_gpus) gpus += fmt::format("{}{}", gpus.empty() ? "" : ",", g);
    return "holds GPU " + gpus;
  }
  std::string text;
  for (const auto& [index, bytes] : t.gpu_memory) {
    text += fmt::format("{}GPU {}: {}", text.empty() ? "" : ", ", index,
                        t.gpu_memory_unknown && bytes == 0 ? std::string("?") : format_bytes(bytes));
  }
  return text;
}

std::string drm_gpu_plan_lines(const PlannedDrmGpu& g) {
  std::string out = fmt::format("  {} GPU {}: expected to free {} ({} client{}{}){}\n", g.vendor, g.pci_address,
                                format_bytes(g.expected_free_bytes), g.ending.size(), g.ending.size() == 1 ? "" : "s",
                                g.kfd_pids.empty() ? std::string() : fmt::format(", {} KFD context{}", g.kfd_pids.size(), g.kfd_pids.size() == 1 ? "" : "s"),
                                g.baseline_used ? fmt::format(" (now {} used)", format_bytes(*g.baseline_used))
                                                : std::string(" (the driver reports no VRAM use: verified by its clients)"));
  for (const auto& c : g.kept) {
    std::string outside;
    for (pid_t pid : c.outside_holders) outside += fmt::format("{}{}", outside.empty() ? "" : ", ", pid);
    out += fmt::format("           client {} ({}) stays: PID {} also holds it and is not signalled\n", c.identity,
                       format_bytes(c.device_bytes), outside);
  }
  return out;
}

std::string state_words(const PlannedTarget& t) {
  std::string s(1, t.state);
  if (t.state == 'D' && !t.wchan.empty()) s += " (" + sanitize_for_terminal(t.wchan) + ")";
  return s;
}

// The first line of a target in the plan: PID, user, state, memory, then the command in what
// the line leaves.
std::string target_line(const PlannedTarget& t, const std::string& state, const std::string& missing_command,
                        const OutputWidth& width) {
  const std::string start = fmt::format("  {:>7}  {} {:<6} {:<18} ", t.pid, fixed_cell(t.user.empty() ? "?" : t.user, 10),
                                        state, memory_text(t));
  return start + width.rest_of_line(t.command.empty() ? missing_command : t.command, start) + "\n";
}

std::string outcome_words(const TargetOutcome& o, const KillSettings& settings) {
  const std::string ms = o.exit_ms ? fmt::format(" in {:.0f} ms", *o.exit_ms) : std::string();
  if (o.outcome == KillOutcome::ExitedAfterSignal) return fmt::format("exited after {}{}", settings.signal, ms);
  if (o.outcome == KillOutcome::Killed) {
    return fmt::format("killed: {} was not enough after {:.1f} s, SIGKILL ended it{}", settings.signal,
                       settings.timeout_s, ms);
  }
  if (o.outcome == KillOutcome::AlreadyGone) return "already gone: it had exited before it was signalled";
  if (o.outcome == KillOutcome::Zombie) return "zombie: it already holds no GPU memory";
  if (o.outcome == KillOutcome::StuckInD) {
    return fmt::format(
        "stuck in D state{}: SIGKILL takes effect only when that kernel call returns (often NFS or a hung "
        "device)",
        o.wchan.empty() ? std::string() : " in " + sanitize_for_terminal(o.wchan));
  }
  if (o.outcome == KillOutcome::Survived) return survivor_words(o, settings);
  if (o.outcome == KillOutcome::PermissionDenied) return "permission denied";
  if (o.outcome == KillOutcome::IdentityChanged) return "skipped: the PID now names another process (PID reuse); nothing sent";
  if (o.outcome == KillOutcome::Refused) return "refused";
  if (o.outcome == KillOutcome::Planned) return "would be signalled";
  return kill_outcome_name(o.outcome);
}

Json optional_pid(const std::optional<pid_t>& pid) { return pid ? Json(*pid) : Json(nullptr); }

Json drm_clients_json(const std::vector<PlannedDrmClient>& clients) {
  Json out = Json::array();
  for (const auto& c : clients) {
    out.push_back(Json{{"client_id", c.by_pasid ? Json(nullptr) : Json(c.identity)},
                       {"pasid", c.by_pasid ? Json(c.identity) : Json(nullptr)},
                       {"device_bytes", c.device_bytes},
                       {"shared_bytes", c.shared_bytes},
                       {"pids", c.holders},
                       {"outside_pids", c.outside_holders}});
  }
  return out;
}

Json drm_gpus_json(const KillPlan& plan, const KillReport& report) {
  Json out = Json::array();
  for (const auto& g : plan.drm_gpus) {
    const DrmGpuVerification* v = nullptr;
    for (const auto& r : report.drm_gpus) {
      if (r.pci_address == g.pci_address) v = &r;
    }
    Json j;
    j["pci_bus_id"] = g.pci_address;
    j["vendor"] = g.vendor;
    j["driver"] = g.driver;
    j["expected_free_bytes"] = g.expected_free_bytes;
    j["baseline_used_bytes"] = g.baseline_used ? Json(*g.baseline_used) : Json(nullptr);
    j["ending_clients"] = drm_clients_json(g.ending);
    j["kept_clients"] = drm_clients_json(g.kept);
    j["kfd_pids"] = g.kfd_pids;
    j["freed_bytes"] = v != nullptr && v->freed_bytes ? Json(*v->freed_bytes) : Json(nullptr);
    j["verified"] = v != nullptr && v->verified;
    j["unverifiable"] = v != nullptr && v->unverifiable;
    j["verify_ms"] = v != nullptr && v->verify_ms ? Json(*v->verify_ms) : Json(nullptr);
    j["still_held_by"] = v != nullptr ? Json(v->still_held_by) : Json::array();
    j["kfd_left"] = v != nullptr ? Json(v->kfd_left) : Json::array();
    j["message"] = v != nullptr && !v->message.empty() ? Json(v->message) : Json(nullptr);
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

int kill_exit_status(const KillReport& report) {
  switch (kill_verdict(report)) {
    case KillVerdict::Interrupted: return exit_code::interrupted_by(report.interrupted_by);
    case KillVerdict::NotFreed: return exit_code::kNotFreed;
    case KillVerdict::PermissionDenied: return exit_code::kPermissionDenied;
    case KillVerdict::Refused: return exit_code::kRefused;
    case KillVerdict::Ok: return exit_code::kOk;
  }
  return exit_code::kInternalError;
}

std::string render_plan(const KillPlan& plan, const KillSettings& settings, const TerminalStyle& style,
                        const OutputWidth& width) {
  std::string out;
  std::vector<const PlannedTarget*> act, skip;
  for (const auto& t : plan.targets) (t.actionable() ? act : skip).push_back(&t);
  // (SIGKILL first leaves nothing to escalate to.)
  const std::string ladder = settings.signal == "SIGKILL" ? settings.signal
                             : settings.escalate
                                 ? fmt::format("{}, then SIGKILL after {:g} s", settings.signal, settings.timeout_s)
                                 : fmt::format("{} only (--no-escalate)", settings.signal);
  out += style.bold(fmt::format("{}Plan: {} process{} to signal ({})", settings.dry_run ? "[dry run] " : "",
                                act.size(), act.size() == 1 ? "" : "es", ladder)) +
         "\n";
  // gpureap's own words under a row, never cut: at a limited width they continue on more lines.
  constexpr std::string_view kUnder = "           ";
  auto row = [&](const PlannedTarget& t) {
    return target_line(t, state_words(t), "?", width) +
           fit_lines(width, "why: " + sanitize_for_terminal(t.reason), kUnder, "                ");
  };
  if (!act.empty()) out += style.dim(fmt::format("  {:>7}  {:<10} {:<6} {:<18} {}", "PID", "USER", "STATE", "GPU MEMORY", "COMMAND")) + "\n";
  for (const auto* t : act) out += row(*t);
  for (const auto* t : skip) {
    std::string label, what;  // the label in colour
    if (t->refusal != Refusal::None) {
      label = style.yellow("refused"), what = "refused: " + sanitize_for_terminal(t->refusal_text);
    } else if (t->permission_denied) {
      label = style.red("not permitted"), what = "not permitted: " + sanitize_for_terminal(t->permission_text);
    } else if (t->zombie()) {
      what = fmt::format("zombie: holds no GPU memory; its parent PID {} has not reaped it", t->ppid);
    }
    std::string what_lines = what.empty() ? std::string(kUnder) + "\n" : fit_lines(width, what, kUnder, kUnder);
    if (!label.empty() && what_lines.rfind(std::string(kUnder) + what.substr(0, what.find(':')) + ":", 0) == 0) {
      what_lines.replace(kUnder.size(), what.find(':'), label);
    }
    out += target_line(*t, t->present ? state_words(*t) : "-", "(not visible here)", width) +
           fit_lines(width, "why: " + sanitize_for_terminal(t->reason), kUnder, "                ") + what_lines;
  }
  for (pid_t pid : plan.missing) out += fmt::format("  {:>7}  no such process\n", pid);
  for (const auto& g : plan.gpus) {
    out += fit_lines(width,
                     fmt::format("GPU {}: expected to free {}{}{}", g.index, format_bytes(g.expected_free_bytes),
                                 g.orphaned_bytes > 0 ? fmt::format(", of which {} held only by orphaned holders",
                                                                    format_bytes(g.orphaned_bytes))
                                                      : std::string(),
                                 g.baseline_used ? fmt::format(" (now {} used)", format_bytes(*g.baseline_used))
                                                 : std::string()),
                     "  ", "    ");
  }
  for (const auto& g : plan.drm_gpus) out += drm_gpu_plan_lines(g);
  return out;
}

std::string render_results(const KillPlan& plan, const KillReport& report, const TerminalStyle& style) {
  std::string out = style.bold("Results:") + "\n";
  for (const auto& o : report.targets) {
    const PlannedTarget* t = planned_for(plan, o.pid);
    std::string line = fmt::format("  {:>7}  {}", o.pid, outcome_words(o, report.settings));
    if (o.discovered) line += " (appeared during the kill)";
    if (!o.signals.empty() && o.outcome != KillOutcome::ExitedAfterSignal) {
      std::string sent;
      for (const auto& s : o.signals) sent += (sent.empty() ? "" : ", ") + s;
      line += " [sent " + sent + "]";
    }
    if (o.outcome == KillOutcome::Refused || o.outcome == KillOutcome::PermissionDenied) {
      line = style.yellow(line);
    } else if (o.outcome == KillOutcome::Survived || o.outcome == KillOutcome::StuckInD) {
      line = style.red(line);
    }
    out += line + "\n";
    if (!o.detail.empty() && (t == nullptr || o.detail != t->reason)) {
      out += "           " + sanitize_for_terminal(o.detail) + "\n";
    }
    if (!o.cgroup_killed.empty()) {
      out += "           its tree was its own cgroup: ended whole with cgroup.kill (" +
             sanitize_for_terminal(o.cgroup_killed) + ")\n";
    }
    if (o.resumed_parent) {
      out += fmt::format("           resumed {} (PID {}), stopped when its child was\n",
                         sanitize_for_terminal(o.resumed_parent->comm), o.resumed_parent->pid);
    }
  }
  for (pid_t pid : plan.missing) out += fmt::format("  {:>7}  no such process\n", pid);
  for (const auto& note : report.notes) out += "  " + sanitize_for_terminal(note) + "\n";
  if (report.settings.dry_run) return out;
  if (!report.settings.verify) {
    out += "  memory release not verified (--no-verify)\n";
    return out;
  }
  for (const auto& g : report.gpus) {
    if (g.verified) {
      out += style.green(fmt::format("  GPU {}: {} freed, verified in {:.0f} ms", g.index,
                                     format_bytes(g.freed_bytes.value_or(0)), g.verify_ms.value_or(0))) +
             "\n";
    } else {
      out += style.red("  " + sanitize_for_terminal(g.message)) + "\n";
    }
  }
  for (const auto& g : report.drm_gpus) {
    if (g.verified && g.freed_bytes) {
      out += style.green(fmt::format("  {} GPU {}: {} freed, its clients gone, verified in {:.0f} ms", g.vendor,
                                     g.pci_address, format_bytes(*g.freed_bytes), g.verify_ms.value_or(0))) +
             "\n";
    } else if (g.unverifiable) {
      out += style.yellow("  " + sanitize_for_terminal(g.message)) + "\n";
    } else {
      out += style.red("  " + sanitize_for_terminal(g.message)) + "\n";
    }
  }
  return out;
}

Json kill_report_json(const KillPlan& plan, const KillReport& report) {
  Json out;
  out["schema"] = kKillSchema;
  out["dry_run"] = report.settings.dry_run;
  out["signal"] = report.settings.signal;
  out["timeout_s"] = report.settings.timeout_s;
  out["escalate"] = report.settings.escalate;
  out["tree"] = report.settings.tree;
  out["group"] = report.settings.group;
  out["verify"] = report.settings.verify && !report.settings.dry_run;
  Json targets = Json::array();
  for (const auto& o : report.targets) {
    const PlannedTarget* t = planned_for(plan, o.pid);
    Json j;
    j["pid"] = o.pid;
    j["outcome"] = kill_outcome_name(o.outcome);
    j["signals"] = o.signals;
    j["exit_ms"] = o.exit_ms ? Json(*o.exit_ms) : Json(nullptr);
    j["reason"] = t != nullptr ? Json(t->reason) : Json("appeared during the kill");
    j["via"] = t != nullptr ? optional_pid(t->via) : Json(nullptr);
    j["discovered"] = o.discovered;
    j["user"] = t != nullptr && !t->user.empty() ? Json(t->user) : Json(nullptr);
    j["uid"] = t != nullptr && t->uid ? Json(*t->uid) : Json(nullptr);
    const char state = o.final_state != '?' ? o.final_state : (t != nullptr ? t->state : '?');
    j["state"] = state != '?' ? Json(std::string(1, state)) : Json(nullptr);
    j["wchan"] = o.wchan.empty() ? Json(nullptr) : Json(o.wchan);
    j["ppid"] = t != nullptr && t->present ? Json(t->ppid) : Json(nullptr);
    j["pgid"] = t != nullptr && t->present ? Json(t->pgid) : Json(nullptr);
    j["command"] = t != nullptr && !t->command.empty() ? Json(t->command) : Json(nullptr);
    j["container"] = t != nullptr && !t->container_id.empty() ? Json(t->container_id) : Json(nullptr);
    Json memory = Json::array();
    if (t != nullptr) {
      for (const auto& [index, bytes] : t->gpu_memory) memory.push_back(Json{{"gpu", index}, {"bytes", bytes}});
    }
    j["gpu_memory"] = memory;
    Json drm_memory = Json::array();
    if (t != nullptr) {
      for (const auto& [pci, bytes] : t->drm_memory) drm_memory.push_back(Json{{"pci_bus_id", pci}, {"bytes", bytes}});
    }
    j["drm_memory"] = drm_memory;
    if (t != nullptr && t->refusal != Refusal::None) {
      j["refusal"] = Json{{"kind", refusal_name(t->refusal)}, {"message", t->refusal_text}};
    } else {
      j["refusal"] = nullptr;
    }
    j["detail"] = o.detail.empty() ? Json(nullptr) : Json(o.detail);
    j["cgroup_killed"] = o.cgroup_killed.empty() ? Json(nullptr) : Json(o.cgroup_killed);
    j["resumed_parent"] = o.resumed_parent ? Json{{"pid", o.resumed_parent->pid}, {"comm", o.resumed_parent->comm}}
                                           : Json(nullptr);
    targets.push_back(std::move(j));
  }
  out["targets"] = targets;
  out["missing_pids"] = plan.missing;
  Json gpus = Json::array();
  for (const auto& g : plan.gpus) {
    Json j;
    j["index"] = g.index;
    j["expected_free_bytes"] = g.expected_free_bytes;
    j["orphaned_bytes"] = g.orphaned_bytes;
    j["baseline_used_bytes"] = g.baseline_used ? Json(*g.baseline_used) : Json(nullptr);
    const GpuVerification* v = nullptr;
    for (const auto& r : report.gpus) {
      if (r.index == g.index) v = &r;
    }
    j["freed_bytes"] = v != nullptr && v->freed_bytes ? Json(*v->freed_bytes) : Json(nullptr);
    j["verified"] = v != nullptr && v->verified;
    j["verify_ms"] = v != nullptr && v->verify_ms ? Json(*v->verify_ms) : Json(nullptr);
    j["still_held_by"] = v != nullptr ? Json(v->still_held_by) : Json::array();
    j["message"] = v != nullptr && !v->message.empty() ? Json(v->message) : Json(nullptr);
    gpus.push_back(std::move(j));
  }
  out["gpus"] = gpus;
  out["drm_gpus"] = drm_gpus_json(plan, report);
  out["notes"] = report.notes;
  out["exit_code"] = kill_exit_status(report);
  return out;
}

}  // namespace gpureap
