// Helpers shared by the `gpureap doctor` integration tests.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim_harness.hpp"

namespace gpureap::test {

// gpureap doctor --json <args>, parsed; the exit code in *exit_code. The machine's own
// kernel log is left out unless the test names one. As root it runs in a mount namespace of
// its own with an empty tmpfs on /dev/shm, so that no test sees or touches the host's; the
// shell commands in shm_setup run there first (e.g. to leave files in that /dev/shm).
inline nlohmann::json doctor_json(const SimHost& host, std::vector<std::string> args, int* exit_code,
                                  const std::map<std::string, std::string>& env = {},
                                  const std::string& shm_setup = "") {
  std::vector<std::string> argv = {"doctor", "--json"};
  const bool names_log = std::find(args.begin(), args.end(), "--kernel-log") != args.end();
  if (!names_log) argv.push_back("--no-kernel-log");
  argv.insert(argv.end(), args.begin(), args.end());
  if (!running_as_root()) {
    if (!shm_setup.empty()) ADD_FAILURE() << "shm_setup needs root (a private /dev/shm)";
    return host.gpureap_json(argv, exit_code, env);
  }
  std::vector<std::string> command = {
      "/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
      "mount -t tmpfs -o size=64m gpureap-test /dev/shm || exit 99; " + (shm_setup.empty() ? std::string() : shm_setup + " || exit 98; ") +
          "exec \"$0\" \"$@\"",
      gpureap_binary()};
  command.insert(command.end(), argv.begin(), argv.end());
  SpawnOptions options;
  options.env = host.env();
  for (const auto& [k, v] : env) options.env[k] = v;
  const CommandResult result = run_command(command, options, 120000);
  if (exit_code != nullptr) *exit_code = result.exit_code;
  try {
    return nlohmann::json::parse(result.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "gpureap doctor gave invalid JSON (" << e.what() << "), exit " << result.exit_code
                  << "\nstdout: " << result.out << "\nstderr: " << result.err;
    return nlohmann::json::object();
  }
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
