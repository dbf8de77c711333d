#include "cli/doctor/doctor_render.hpp"

#include <chrono>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "text/human_format.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

nlohmann::json opt(const std::optional<std::uint64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

std::string iso_time(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(t)), ms);
}

std::string severity_label(Severity s, const TerminalStyle& style) {
  switch (s) {
    case Severity::Critical: return style.red(style.bold("CRITICAL"));
    case Severity::Warning: return style.yellow("WARNING ");
    case Severity::Info: return style.cyan("INFO    ");
  }
  return "";
}

}  // namespace

nlohmann::json doctor_json(const DoctorReport& report) {
  const Snapshot& s = *report.snapshot;
  const Diagnosis& d = *report.diagnosis;
  nlohmann::json out;
  out["schema"] = "gpureap.doctor/1";
  out["generated_at"] = iso_time(s.taken_at);
  out["driver"] = {{"loaded", s.driver.loaded},
                   {"library", s.driver.library_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.driver.library_path)},
                   {"driver_version", s.driver.driver_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.driver.driver_version)},
                   {"error", s.driver.loaded ? nlohmann::json(nullptr) : nlohmann::json(s.driver.message)}};
  out["host"] = {{"in_child_pid_namespace", s.in_child_pid_namespace},
                 {"processes_not_inspected", s.processes_not_inspected},
                 {"dev_dir", s.table.options().dev_dir}};
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : s.gpus) {
    gpus.push_back({{"index", g.reading.index},
                    {"name", g.reading.name},
                    {"pci_bus_id", g.reading.pci_bus_id},
                    {"error", g.reading.error ? nlohmann::json(g.reading.error->name()) : nlohmann::json(nullptr)},
                    {"used_bytes", opt(g.memory.used)},
                    {"attributed_bytes", g.memory.attributed},
                    {"unattributed_bytes", opt(g.memory.unattributed)},
                    {"tolerance_bytes", tolerance_bytes(g, *report.options)}});
  }
  out["gpus"] = gpus;
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : d.findings) {
    nlohmann::json remedies = nlohmann::json::array();
    for (const auto& r : f.remedies) {
      remedies.push_back({{"command", r.command.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.command)},
                          {"risk", risk_name(r.risk)},
                          {"explanation", r.explanation},
                          {"applied_by_fix", r.applied_by_fix}});
    }
    findings.push_back({{"id", finding_id_name(f.id)},
                        {"severity", severity_name(f.severity)},
                        {"gpu", f.gpu ? nlohmann::json(*f.gpu) : f.gpu_pci.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.gpu_pci)},
                        {"summary", f.summary},
                        {"details", f.details},
                        {"evidence", f.evidence},
                        {"remedies", remedies}});
  }
  out["findings"] = findings;
  out["notes"] = d.notes;
  if (report.fix_requested) {
    nlohmann::json fixes = nlohmann::json::array();
    for (const auto& r : report.fixes) {
      fixes.push_back({{"finding_id", r.finding_id ? nlohmann::json(finding_id_name(*r.finding_id)) : nlohmann::json(nullptr)}, {"action", r.description}, {"outcome", fix_outcome_name(r.outcome)}, {"message", r.message}});
    }
    out["fixes"] = fixes;
  } else {
    out["fixes"] = nullptr;
  }
  out["exit_code"] = report.exit_code ? nlohmann::json(*report.exit_code) : nlohmann::json(nullptr);
  return out;
}

std::string render_doctor(const DoctorReport& report, const TerminalStyle& style) {
  const Snapshot& s = *report.snapshot;
  const Diagnosis& d = *report.diagnosis;
  std::string out = style.bold("gpureap doctor");
  if (s.driver.loaded) {
    out += fmt::format(" · driver {} · {} GPU{}",
                       s.driver.driver_version.empty() ? "?" : sanitize_for_terminal(s.driver.driver_version),
                       s.gpus.size(), s.gpus.size() == 1 ? "" : "s");
  }
  out += fmt::format(" · {:%Y-%m-%d %H:%M:%S}\n", fmt::localtime(std::chrono::system_clock::to_time_t(s.taken_at)));
  if (s.driver.loaded) out += style.dim("NVML library: " + sanitize_for_terminal(s.driver.library_path)) + "\n";
  if (s.table.options().dev_dir != "/dev") {
    out += style.dim(fmt::format("GPU device files: {} (GPUREAP_DEV_DIR)",
                                 sanitize_for_terminal(s.table.options().dev_dir))) +
           "\n";
  }
  for (const auto& g : s.gpus) {
    if (g.reading.error) continue;
    out += style.dim(fmt::format("GPU {} {}: {} used, {} by listed processes, {} unexplained", g.reading.index,
                                 sanitize_for_terminal(g.reading.name), format_bytes(g.memory.used),
                                 format_bytes(g.memory.attributed),
                                 format_bytes(g.memory.unattributed))) +
           "\n";
  }
  if (!report.fixes.empty()) {
    out += "\n" + style.bold("Fixes applied:") + "\n";
    for (const auto& r : report.fixes) {
      out += fmt::format("  {} {}{}\n", r.outcome == FixOutcome::Done ? style.green("done   ") : style.red(fmt::format("{:<7}", fix_outcome_name(r.outcome))),
                         sanitize_for_terminal(r.description),
                         r.message.empty() ? "" : ": " + sanitize_for_terminal(r.message));
    }
  }
  out += "\n";
  if (d.findings.empty()) {
    out += style.green("No problems found") +
           ": memory is accounted for; no orphaned holders, zombies, D-state processes, leftover shared memory or "
           "Xid events.\n";
  }
  for (const auto& f : d.findings) {
    // Findings quote commands, file names and kernel-log text: each line goes through the sanitiser.
    out += severity_label(f.severity, style) + "  " + style.bold(sanitize_for_terminal(f.summary)) + "\n";
    for (const auto& line : f.details) out += "          " + sanitize_for_terminal(line) + "\n";
    if (!f.remedies.empty()) {
      out += "          What to do, safest first:\n";
      int n = 1;
      for (const auto& r : f.remedies) {
        const std::string risk = fmt::format("[risk: {}]", risk_name(r.risk));
        const std::string explanation = sanitize_for_terminal(r.explanation);
        if (r.command.empty()) {
          out += fmt::format("            {}. {} {}\n", n++, explanation, style.dim(risk));
        } else {
          out += fmt::format("            {}. {}  {} {}{}\n", n++, style.bold(sanitize_for_terminal(r.command)),
                             style.dim(risk), explanation,
                             r.applied_by_fix ? style.dim(" (doctor --fix does this)") : "");
        }
      }
    }
    out += "\n";
  }
  for (const auto& note : d.notes) out += style.dim("Note: " + sanitize_for_terminal(note)) + "\n";
  std::size_t counts[3] = {0, 0, 0};
  for (const auto& f : d.findings) ++counts[static_cast<int>(f.severity)];
  out += fmt::format("{} critical, {} warning{}, {} info{}\n", counts[2], counts[1], counts[1] == 1 ? "" : "s",
                     counts[0], report.exit_code ? fmt::format(" · exit status {}", *report.exit_code) : "");
  return out;
}

std::string render_fix_plan(const std::vector<const FixAction*>& actions, const TerminalStyle& style) {
  std::string out = style.bold(fmt::format("doctor --fix will do {} thing{}:", actions.size(), actions.size() == 1 ? "" : "s")) + "\n";
  for (const FixAction* a : actions) out += "  - " + sanitize_for_terminal(a->description) + "\n";
  return out;
}

}  // namespace gpureap
