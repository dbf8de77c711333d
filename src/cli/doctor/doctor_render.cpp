#include "cli/doctor/doctor_render.hpp"

#include <chrono>
#include <variant>

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

// A remedy's command, what a person copies: broken at spaces into lines ending in " \\", which
// the shell joins back, so that it fits and still runs as one command when pasted whole.
std::string shell_lines(const std::string& command, std::string_view first_indent, std::string_view indent,
                        const OutputWidth& width, const TerminalStyle& style) {
  const std::size_t room = width.columns() ? *width.columns() : 0;
  const OutputWidth narrower(room > 2 ? std::optional<std::size_t>(room - 2) : std::nullopt);
  const auto lines = narrower.wrapped(command, first_indent, indent);
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::size_t lead = i == 0 ? first_indent.size() : indent.size();
    out += lines[i].substr(0, lead) + style.bold(lines[i].substr(lead, lines[i].size() - lead - 1)) +
           (i + 1 < lines.size() ? " \\\n" : "\n");
  }
  return out;
}

// Each kind of evidence as its JSON value.
struct EvidenceJson {
  nlohmann::json operator()(std::nullptr_t) const { return nullptr; }
  nlohmann::json operator()(bool flag) const { return flag; }
  nlohmann::json operator()(std::int64_t number) const { return number; }
  nlohmann::json operator()(std::uint64_t number) const { return number; }
  nlohmann::json operator()(double number) const { return number; }
  nlohmann::json operator()(const std::string& text) const { return text; }
  nlohmann::json operator()(const EvidenceList& list) const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : list) out.push_back(std::visit(*this, item.value));
    return out;
  }
  nlohmann::json operator()(const Evidence& record) const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, value] : record.fields()) out[name] = std::visit(*this, value.value);
    return out;
  }
};

}  // namespace

nlohmann::json evidence_json(const EvidenceValue& evidence) { return std::visit(EvidenceJson{}, evidence.value); }

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
                        {"evidence", evidence_json(f.evidence)},
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

std::string render_doctor(const DoctorReport& report, const TerminalStyle& style, const OutputWidth& width) {
  const Snapshot& s = *report.snapshot;
  const Diagnosis& d = *report.diagnosis;
  const auto dim = [&](const std::string& line) { return style.dim(line); };
  std::vector<std::string> items = {style.bold("gpureap doctor")};
  if (s.driver.loaded) {
    items.push_back("driver " + (s.driver.driver_version.empty() ? "?" : sanitize_for_terminal(s.driver.driver_version)));
    items.push_back(fmt::format("{} GPU{}", s.gpus.size(), s.gpus.size() == 1 ? "" : "s"));
  }
  items.push_back(fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(std::chrono::system_clock::to_time_t(s.taken_at))));
  std::string out = width.joined(items, " · ", "  ") + "\n";
  if (s.driver.loaded) out += fit_lines(width, "NVML library: " + sanitize_for_terminal(s.driver.library_path), "", "  ", dim);
  if (s.table.options().dev_dir != "/dev") {
    out += fit_lines(width, fmt::format("GPU device files: {} (GPUREAP_DEV_DIR)", sanitize_for_terminal(s.table.options().dev_dir)), "", "  ", dim);
  }
  for (const auto& g : s.gpus) {
    if (g.reading.error) continue;
    out += fit_lines(width, fmt::format("GPU {} {}: {} used, {} by listed processes, {} unexplained", g.reading.index,
                              sanitize_for_terminal(g.reading.name), format_bytes(g.memory.used),
                              format_bytes(g.memory.attributed), format_bytes(g.memory.unattributed)), "", "  ", dim);
  }
  if (!report.fixes.empty()) {
    out += "\n" + style.bold("Fixes applied:") + "\n";
    for (const auto& r : report.fixes) {
      const std::string outcome = fmt::format("{:<7}", r.outcome == FixOutcome::Done ? "done" : fix_outcome_name(r.outcome));
      const std::string line = fit_lines(width, sanitize_for_terminal(r.description) + (r.message.empty() ? "" : ": " + sanitize_for_terminal(r.message)), "          ", "          ");
      out += "  " + (r.outcome == FixOutcome::Done ? style.green(outcome) : style.red(outcome)) + line.substr(9);
    }
  }
  out += "\n";
  if (d.findings.empty()) {
    out += fit_lines(width,
                     "No problems found: memory is accounted for; no orphaned holders, zombies, D-state processes, "
                     "leftover shared memory or Xid events.",
                     "", "");
    out.replace(0, std::string_view("No problems found").size(), style.green("No problems found"));
  }
  constexpr std::string_view kDetail = "          ";   // under the summary
  constexpr std::string_view kRemedy = "               ";  // under a remedy's text
  for (const auto& f : d.findings) {
    // Findings quote commands, file names and kernel-log text: each line goes through the sanitiser.
    out += severity_label(f.severity, style) + "  " +
           fit_lines(width, sanitize_for_terminal(f.summary), "", kDetail, [&](const std::string& line) { return style.bold(line); });
    for (const auto& line : f.details) out += fit_lines(width, sanitize_for_terminal(line), kDetail, kDetail);
    if (!f.remedies.empty()) {
      out += std::string(kDetail) + "What to do, safest first:\n";
      int n = 1;
      for (const auto& r : f.remedies) {
        const std::string risk = fmt::format("[risk: {}]", risk_name(r.risk));
        const std::string explanation = sanitize_for_terminal(r.explanation);
        const std::string number = fmt::format("            {}. ", n++);
        if (r.command.empty()) {
          out += fit_lines(width, explanation + " " + risk, number, kRemedy);
        } else {
          // The command on a line of its own when the width is limited: it is what a person copies.
          const std::string command = sanitize_for_terminal(r.command);
          const std::string rest = risk + " " + explanation + (r.applied_by_fix ? " (doctor --fix does this)" : "");
          if (!width.columns()) {
            out += fmt::format("{}{}  {} {}{}\n", number, style.bold(command), style.dim(risk), explanation,
                               r.applied_by_fix ? style.dim(" (doctor --fix does this)") : "");
          } else {
            out += shell_lines(command, number, kRemedy, width, style) + fit_lines(width, rest, kRemedy, kRemedy);
          }
        }
      }
    }
    out += "\n";
  }
  for (const auto& note : d.notes) out += fit_lines(width, "Note: " + sanitize_for_terminal(note), "", "      ", dim);
  std::size_t counts[3] = {0, 0, 0};
  for (const auto& f : d.findings) ++counts[static_cast<int>(f.severity)];
  out += fmt::format("{} critical, {} warning{}, {} info{}\n", counts[2], counts[1], counts[1] == 1 ? "" : "s",
                     counts[0], report.exit_code ? fmt::format(" · exit status {}", *report.exit_code) : "");
  return out;
}

std::string render_fix_plan(const std::vector<const FixAction*>& actions, const TerminalStyle& style,
                            const OutputWidth& width) {
  std::string out = style.bold(fmt::format("doctor --fix will do {} thing{}:", actions.size(), actions.size() == 1 ? "" : "s")) + "\n";
  for (const FixAction* a : actions) out += fit_lines(width, sanitize_for_terminal(a->description), "  - ", "    ");
  return out;
}

}  // namespace gpureap
