#include "cli/run/run_render.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "kill/escalation.hpp"
#include "text/human_format.hpp"
#include "text/sanitize.hpp"
#include "text/signal_names.hpp"

namespace gpureap {
namespace {

using Json = nlohmann::ordered_json;

int status_code(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return exit_code::kRunCannotRun;
}

std::string status_words(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return fmt::format("was killed by {}{}", signal_name(WTERMSIG(wait_status)),
                       WCOREDUMP(wait_status) ? " (core dumped)" : "");
  }
  return "ended";
}

Json status_json(int wait_status) {
  Json j;
  j["exit_code"] = WIFEXITED(wait_status) ? Json(WEXITSTATUS(wait_status)) : Json(nullptr);
  j["signal"] = WIFSIGNALED(wait_status) ? Json(signal_name(WTERMSIG(wait_status))) : Json(nullptr);
  j["status"] = status_code(wait_status);
  return j;
}

Json optional_bytes(const std::optional<std::uint64_t>& bytes) { return bytes ? Json(*bytes) : Json(nullptr); }

const char* stage_words(job::SpawnStage stage) {
  switch (stage) {
    case job::SpawnStage::Cgroup: return "cannot enter the job's cgroup";
    case job::SpawnStage::Exec: return "cannot run";
    case job::SpawnStage::Fork: return "cannot start a process";
    case job::SpawnStage::None: break;
  }
  return "";
}

}  // namespace

int run_exit_status(const job::RunReport& report) {
  if (report.end == job::JobEnd::SpawnFailed) {
    if (report.spawn.failed_at != job::SpawnStage::Exec) return exit_code::kRunCannotRun;
    return report.spawn.error == ENOENT ? exit_code::kRunCommandNotFound : exit_code::kRunCannotExecute;
  }
  if (report.left_behind()) return exit_code::kRunLeftBehind;
  if (report.end == job::JobEnd::Hung) return exit_code::kRunHung;
  if (report.end == job::JobEnd::FailFast && report.failed) return status_code(report.failed->wait_status);
  if (report.main_wait_status) return status_code(*report.main_wait_status);
  return exit_code::kRunCannotRun;
}

std::string render_run_summary(const job::RunReport& report) {
  std::string out;
  auto line = [&out](const std::string& text) { out += "gpureap run: " + text + "\n"; };
  const std::string command = report.argv.empty() ? std::string() : sanitize_for_terminal(report.argv.front());
  if (report.end == job::JobEnd::SpawnFailed) {
    line(fmt::format("{}: {}: {}", stage_words(report.spawn.failed_at), command, std::strerror(report.spawn.error)));
    return out;
  }
  if (report.end == job::JobEnd::FailFast && report.failed) {
    line(fmt::format("--fail-fast: PID {} ({}), which used a GPU, {}: ending the job", report.failed->pid,
                     sanitize_for_terminal(report.failed->comm), status_words(report.failed->wait_status)));
  }
  if (report.end == job::JobEnd::Hung) {
    line(fmt::format("the job hung: none of its processes used CPU or GPU for {:.1f} s (--hang-timeout): ending it",
                     report.idle_seconds.value_or(0)));
  }
  for (const auto& e : report.evidence) {
    std::string gpus;
    for (unsigned g : e.gpus) gpus += (gpus.empty() ? " gpu " : ",") + std::to_string(g);
    line(fmt::format("  PID {} ({}) state {}{}{}, {:.2f} s CPU{}{}", e.pid, sanitize_for_terminal(e.comm),
                     std::string(1, e.state), e.wchan.empty() ? "" : " in ", sanitize_for_terminal(e.wchan),
                     e.cpu_seconds, gpus, e.sm_util_percent ? fmt::format(", SM {}%", *e.sm_util_percent) : ""));
    for (const auto& f : e.dump_files) line("    dump: " + sanitize_for_terminal(f));
    for (const auto& n : e.notes) line("    " + sanitize_for_terminal(n));
  }
  if (!report.ended.empty()) {
    line(fmt::format("{} process{} of the job {} left when it ended ({}):", report.ended.size(),
                     report.ended.size() == 1 ? "" : "es", report.ended.size() == 1 ? "was" : "were",
                     report.ownership == job::Ownership::Cgroup ? "its cgroup"
                     : report.no_cgroup_reason.empty()       ? "gpureap's descendants"
                                                             : "gpureap's descendants: " + report.no_cgroup_reason));
    // Each process on a line of its own, up to a screenful; beyond that (a fork bomb, a pool
    // of thousands) the ones that ended cleanly are counted and only the others listed.
    constexpr std::size_t kListedAtMost = 20;
    const bool many = report.ended.size() > kListedAtMost;
    std::map<std::string, std::size_t> clean;
    for (const auto& t : report.ended) {
      const bool ended_cleanly = t.outcome == KillOutcome::ExitedAfterSignal || t.outcome == KillOutcome::Killed ||
                                 t.outcome == KillOutcome::AlreadyGone;
      if (many && ended_cleanly) {
        ++clean[kill_outcome_name(t.outcome)];
        continue;
      }
      std::string signals;
      for (const auto& s : t.signals) signals += (signals.empty() ? "" : " ") + s;
      // (A survivor never signalled says so: run's ladder always escalates.)
      const std::string outcome =
          t.outcome == KillOutcome::Survived ? survivor_words(t, KillSettings{}) : kill_outcome_name(t.outcome);
      line(fmt::format("  PID {}: {}{}{}{}", t.pid, outcome,
                       t.exit_ms ? fmt::format(" after {:.0f} ms", *t.exit_ms) : "",
                       signals.empty() ? "" : " (" + signals + ")",
                       t.detail.empty() ? "" : ": " + sanitize_for_terminal(t.detail)));
    }
    for (const auto& [outcome, count] : clean) line(fmt::format("  {} {} (--json lists each)", count, outcome));
  }
  for (const auto& v : report.verification) {
    if (v.verified) {
      if (!report.ended.empty() || report.end != job::JobEnd::Exited) {
        line(fmt::format("GPU {}: the job's memory was verified released{}", v.index,
                         v.freed_bytes ? fmt::format(" ({} freed)", format_bytes(*v.freed_bytes)) : ""));
      }
    } else {
      line(sanitize_for_terminal(v.message));
    }
  }
  for (const auto& n : report.notes) {
    // Notes that only explain a limit matter when something went wrong.
    if (!out.empty() || report.left_behind()) line(sanitize_for_terminal(n));
  }
  if (report.left_behind()) {
    line(fmt::format("exit status {}: part of the job or its GPU memory is still there", exit_code::kRunLeftBehind));
  }
  return out;
}

namespace {

Json failed_process_json(const job::RunReport& report) {
  if (!report.failed) return nullptr;
  Json f = status_json(report.failed->wait_status);
  f["pid"] = report.failed->pid;
  f["comm"] = report.failed->comm;
  f["seen_by"] = report.failed->seen_by_wait ? "wait" : "exit-events";
  return f;
}

// What was left of the job when its main command ended, and how each was ended.
Json left_and_ended_json(const job::RunReport& report) {
  Json ended = Json::array();
  for (const auto& t : report.ended) {
    ended.push_back(Json{{"pid", t.pid},
                         {"outcome", kill_outcome_name(t.outcome)},
                         {"signals", t.signals},
                         {"exit_ms", t.exit_ms ? Json(*t.exit_ms) : Json(nullptr)},
                         {"state", t.final_state != '?' ? Json(std::string(1, t.final_state)) : Json(nullptr)},
                         {"wchan", t.wchan.empty() ? Json(nullptr) : Json(t.wchan)},
                         {"discovered", t.discovered},
                         {"detail", t.detail.empty() ? Json(nullptr) : Json(t.detail)},
                         {"cgroup_killed", t.cgroup_killed.empty() ? Json(nullptr) : Json(t.cgroup_killed)}});
  }
  return ended;
}

Json evidence_json(const job::RunReport& report) {
  Json evidence = Json::array();
  for (const auto& e : report.evidence) {
    evidence.push_back(Json{{"pid", e.pid},
                            {"comm", e.comm},
                            {"state", std::string(1, e.state)},
                            {"wchan", e.wchan.empty() ? Json(nullptr) : Json(e.wchan)},
                            {"kernel_stack", e.kernel_stack.empty() ? Json(nullptr) : Json(e.kernel_stack)},
                            {"cpu_s", e.cpu_seconds},
                            {"gpus", e.gpus},
                            {"sm_util_percent", e.sm_util_percent ? Json(*e.sm_util_percent) : Json(nullptr)},
                            {"dump_files", e.dump_files},
                            {"notes", e.notes}});
  }
  return evidence;
}

// Each GPU the job was seen on, with its release as verified.
Json gpus_json(const job::RunReport& report) {
  Json gpus = Json::array();
  for (const auto& g : report.gpus) {
    Json j;
    j["index"] = g.index;
    j["job_seen_on_it"] = g.seen;
    j["used_at_first_sample_bytes"] = optional_bytes(g.used_first_bytes);
    j["used_after_bytes"] = optional_bytes(g.used_after_bytes);
    j["job_peak_bytes"] = g.job_peak_bytes;
    j["job_last_bytes"] = g.job_last_bytes;
    j["job_pids"] = g.job_pids;
    const GpuVerification* v = nullptr;
    for (const auto& r : report.verification) {
      if (r.index == g.index) v = &r;
    }
    j["verified_free"] = v != nullptr && v->verified;
    j["freed_bytes"] = v != nullptr && v->freed_bytes ? Json(*v->freed_bytes) : Json(nullptr);
    j["verify_ms"] = v != nullptr && v->verify_ms ? Json(*v->verify_ms) : Json(nullptr);
    j["still_held_by"] = v != nullptr ? Json(v->still_held_by) : Json::array();
    j["message"] = v != nullptr && !v->message.empty() ? Json(v->message) : Json(nullptr);
    gpus.push_back(std::move(j));
  }
  return gpus;
}

}  // namespace

Json run_report_json(const job::RunReport& report) {
  Json out;
  out["schema"] = kRunSchema;
  out["command"] = report.argv;
  out["main_pid"] = report.main_pid > 0 ? Json(report.main_pid) : Json(nullptr);
  out["ownership"] = job::ownership_name(report.ownership);
  out["cgroup"] = report.cgroup_path.empty() ? Json(nullptr) : Json(report.cgroup_path);
  out["cgroup_removed"] = report.cgroup_path.empty() ? Json(nullptr) : Json(report.cgroup_removed);
  out["no_cgroup_reason"] = report.no_cgroup_reason.empty() ? Json(nullptr) : Json(report.no_cgroup_reason);
  out["exit_events"] = report.exit_events;
  out["holder_events"] = report.holder_events;
  out["looks_on_events"] = report.looks_on_events;
  out["end"] = job::job_end_name(report.end);
  if (report.end == job::JobEnd::SpawnFailed) {
    out["spawn_error"] = Json{{"stage", stage_words(report.spawn.failed_at)}, {"errno", report.spawn.error},
                              {"message", std::strerror(report.spawn.error)}};
  }
  out["main_status"] = report.main_wait_status ? status_json(*report.main_wait_status) : Json(nullptr);
  out["failed_process"] = failed_process_json(report);
  out["idle_s"] = report.idle_seconds ? Json(*report.idle_seconds) : Json(nullptr);
  out["left_and_ended"] = left_and_ended_json(report);
  out["evidence"] = evidence_json(report);
  out["evidence_dir"] = report.evidence_dir.empty() ? Json(nullptr) : Json(report.evidence_dir);
  out["gpus"] = gpus_json(report);
  Json forwarded = Json::array();
  for (int sig : report.forwarded_signals) forwarded.push_back(signal_name(sig));
  out["forwarded_signals"] = forwarded;
  out["orphans_reaped"] = report.orphans_reaped;
  out["timings"] = Json{{"run_s", report.run_seconds},
                        {"ending_s", report.ending_seconds},
                        {"verify_s", report.verify_seconds},
                        {"samples", report.samples}};
  out["notes"] = report.notes;
  out["exit_code"] = run_exit_status(report);
  return out;
}

}  // namespace gpureap
