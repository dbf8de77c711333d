#include "top/kill_preview.hpp"

#include <signal.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "text/human_format.hpp"
#include "text/sanitize.hpp"
#include "text/signal_names.hpp"

namespace gpureap {
namespace {

constexpr const char* kChosen = "chosen in the view";

const GpuProcessView* exited_listed(const Snapshot& snapshot, pid_t pid) {
  for (const auto& p : snapshot.processes) {
    if (static_cast<pid_t>(p.driver.pid) == pid && p.linux_process == nullptr && !p.held_by.empty()) return &p;
  }
  return nullptr;
}

std::string who(const PlannedTarget& t) {
  const std::string user = t.user.empty() ? "?" : t.user;
  const std::string command = t.command.empty() ? "(not visible here)" : t.command;
  return sanitize_for_terminal(user) + "  " + sanitize_for_terminal(command);
}

std::string outcome_words(const TargetOutcome& o, const KillSettings& settings) {
  const std::string ms = o.exit_ms ? fmt::format(" ({:.0f} ms)", *o.exit_ms) : std::string();
  switch (o.outcome) {
    case KillOutcome::ExitedAfterSignal: return fmt::format("exited after {}{}", settings.signal, ms);
    case KillOutcome::Killed: return "killed by SIGKILL" + ms;
    case KillOutcome::AlreadyGone: return "already gone";
    case KillOutcome::Zombie: return "a zombie (holds no memory)";
    case KillOutcome::StuckInD:
      return "stuck in D state" + (o.wchan.empty() ? std::string() : " in " + sanitize_for_terminal(o.wchan));
    case KillOutcome::Survived: return survivor_words(o, settings);
    case KillOutcome::PermissionDenied: return "permission denied";
    case KillOutcome::IdentityChanged: return "skipped: its PID now names another process";
    case KillOutcome::Refused: return "refused";
    case KillOutcome::Planned: return "not signalled";
  }
  return kill_outcome_name(o.outcome);
}

}  // namespace

std::string ladder_words(Ladder ladder, double timeout_s) {
  switch (ladder) {
    case Ladder::TermThenKill: return fmt::format("SIGTERM, then SIGKILL after {:g} s", timeout_s);
    case Ladder::TermOnly: return "SIGTERM only";
    case Ladder::IntOnly: return "SIGINT only";
    case Ladder::KillNow: return "SIGKILL at once";
  }
  return "";
}

EscalationOptions escalation_for(Ladder ladder, double timeout_s, const std::string& proc_root) {
  EscalationOptions options;
  options.proc_root = proc_root;
  options.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  options.first_signal = ladder == Ladder::IntOnly ? SIGINT : ladder == Ladder::KillNow ? SIGKILL : SIGTERM;
  options.escalate = ladder == Ladder::TermThenKill;
  return options;
}

Selection select_for_view(const Snapshot& fresh, const std::vector<ProcessKey>& chosen, std::vector<std::string>& notes) {
  SelectionCriteria criteria;
  criteria.named_reason = kChosen;
  std::map<pid_t, pid_t> kept_for;  // holder -> the exited PID whose context it keeps
  for (const ProcessKey& key : chosen) {
    if (const GpuProcessView* dead = exited_listed(fresh, key.pid)) {
      for (pid_t holder : dead->held_by) {
        kept_for.emplace(holder, key.pid);
        criteria.pids.push_back(holder);
      }
      continue;
    }
    const ProcessInfo* now = fresh.table.find(key.pid);
    if (key.start_time_ticks != 0 && (now == nullptr || now->start_time_ticks != key.start_time_ticks)) {
      notes.push_back(now == nullptr
                          ? fmt::format("PID {} has exited since it was chosen: nothing to end", key.pid)
                          : fmt::format("PID {} has exited since it was chosen and its number now names another "
                                        "process: left out",
                                        key.pid));
      continue;
    }
    criteria.pids.push_back(key.pid);
  }
  std::sort(criteria.pids.begin(), criteria.pids.end());
  criteria.pids.erase(std::unique(criteria.pids.begin(), criteria.pids.end()), criteria.pids.end());
  Selection selection = select_targets(fresh, criteria);
  for (auto& s : selection.processes) {
    if (auto it = kept_for.find(s.pid); it != kept_for.end() && !s.via) {
      s.reason = fmt::format("keeps the context of exited PID {} alive ({})", it->second, kChosen);
    }
  }
  return selection;
}

KillPreview preview_plan(const KillPlan& plan, std::vector<std::string> notes) {
  KillPreview preview;
  preview.notes = std::move(notes);
  for (const auto& t : plan.targets) {
    PreviewEntry entry{t.pid, who(t), sanitize_for_terminal(t.reason)};
    if (t.actionable()) {
      preview.signalled.push_back(std::move(entry));
      continue;
    }
    if (t.refusal != Refusal::None) {
      entry.why = "refused: " + sanitize_for_terminal(t.refusal_text);
    } else if (t.permission_denied) {
      entry.why = "not permitted: " + sanitize_for_terminal(t.permission_text);
    } else if (t.zombie()) {
      entry.why = fmt::format("a zombie: holds no GPU memory; its parent PID {} has not reaped it", t.ppid);
    } else if (!t.present) {
      entry.why = "refused: not a process in this PID namespace";
    }
    preview.refused.push_back(std::move(entry));
  }
  for (pid_t pid : plan.missing) preview.notes.push_back(fmt::format("PID {}: no such process", pid));
  for (const auto& g : plan.gpus) {
    preview.memory.push_back(fmt::format("GPU {}: {} expected back{}", g.index, format_bytes(g.expected_free_bytes),
                                         g.baseline_used ? fmt::format(" (now {} used)", format_bytes(*g.baseline_used))
                                                         : std::string()));
  }
  for (const auto& g : plan.drm_gpus) {
    preview.memory.push_back(fmt::format("{} GPU {}: {} expected back{}", g.vendor, g.pci_address,
                                         format_bytes(g.expected_free_bytes),
                                         g.baseline_used ? fmt::format(" (now {} used)", format_bytes(*g.baseline_used))
                                                         : std::string(" (its driver reports no VRAM figure)")));
  }
  return preview;
}

std::string kill_status_line(const KillReport& report) {
  std::string line;
  auto add = [&line](const std::string& part) { line += (line.empty() ? "" : " · ") + part; };
  if (report.interrupted_by != 0) add("interrupted by " + signal_name(report.interrupted_by));
  // The memory first: it is what the person came for, and the line may be cut.
  for (const auto& g : report.gpus) {
    if (g.verified) {
      add(fmt::format("GPU {}: {} verified free in {:.0f} ms", g.index, format_bytes(g.freed_bytes.value_or(0)),
                      g.verify_ms.value_or(0)));
    } else {
      add(sanitize_for_terminal(g.message.empty() ? fmt::format("GPU {}: memory not verified free", g.index) : g.message));
    }
  }
  for (const auto& g : report.drm_gpus) {
    if (g.verified) {
      add(fmt::format("{} GPU {}: {} freed, verified in {:.0f} ms", g.vendor, g.pci_address,
                      format_bytes(g.freed_bytes.value_or(0)), g.verify_ms.value_or(0)));
    } else {
      add(sanitize_for_terminal(g.message));
    }
  }
  // Then the processes, those that ended alike in one group: "PID 12, 13 exited after SIGTERM".
  std::vector<std::pair<std::string, std::string>> groups;  // outcome words, PIDs
  for (const auto& o : report.targets) {
    if (o.outcome == KillOutcome::Refused || o.outcome == KillOutcome::Planned) continue;
    TargetOutcome shown = o;
    shown.exit_ms.reset();  // per-process times would split every group
    const std::string words = outcome_words(shown, report.settings) + (o.discovered ? " (joined meanwhile)" : "");
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == words; });
    if (it == groups.end()) {
      groups.emplace_back(words, std::to_string(o.pid));
    } else {
      it->second += ", " + std::to_string(o.pid);
    }
  }
  for (const auto& [words, pids] : groups) add("PID " + pids + " " + words);
  // A parent outside the plan that stopped with its child (runuser, su) and was continued.
  for (const auto& o : report.targets) {
    if (o.resumed_parent) {
      add(fmt::format("resumed {} (PID {}), stopped when its child was", sanitize_for_terminal(o.resumed_parent->comm),
                      o.resumed_parent->pid));
    }
  }
  for (const auto& note : report.notes) add(sanitize_for_terminal(note));
  return line.empty() ? "nothing was signalled" : line;
}

bool kill_succeeded(const KillReport& report) { return kill_verdict(report) == KillVerdict::Ok; }

}  // namespace gpureap
