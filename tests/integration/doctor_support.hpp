// Helpers shared by the `gpureap doctor` integration tests.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim_harness.hpp"

namespace gpureap::test {

// gpureap doctor --json <args>, parsed; the exit code in *exit_code. The machine's own
// kernel log is left out unless the test names one.
inline nlohmann::json doctor_json(const SimHost& host, std::vector<std::string> args, int* exit_code,
                                  const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv = {"doctor", "--json"};
  const bool names_log = std::find(args.begin(), args.end(), "--kernel-log") != args.end();
  if (!names_log) argv.push_back("--no-kernel-log");
  argv.insert(argv.end(), args.begin(), args.end());
  return host.gpureap_json(argv, exit_code, env);
}

// The findings with this id (on this GPU when gpu >= 0).
inline std::vector<nlohmann::json> findings(const nlohmann::json& report, const std::string& id, int gpu = -1) {
  std::vector<nlohmann::json> out;
  if (!report.contains("findings")) return out;
  for (const auto& f : report["findings"]) {
    if (f["id"] != id) continue;
    if (gpu >= 0 && (f["gpu"].is_null() || f["gpu"] != gpu)) continue;
    out.push_back(f);
  }
  return out;
}

inline bool has_remedy(const nlohmann::json& finding, const std::string& command_prefix) {
  for (const auto& r : finding["remedies"]) {
    if (r["command"].is_string() && r["command"].get<std::string>().rfind(command_prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace gpureap::test
