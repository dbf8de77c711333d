// Helpers shared by the `gpureap kill` integration tests.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim_harness.hpp"

namespace gpureap::test {

// gpureap kill <args> --json, parsed; the exit code in *exit_code.
inline nlohmann::json kill_json(const SimHost& host, std::vector<std::string> args, int* exit_code,
                                std::string* err = nullptr, const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv = {"kill"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--json");
  return host.gpureap_json(argv, exit_code, env, err);
}

inline const nlohmann::json* kill_target(const nlohmann::json& report, pid_t pid) {
  if (!report.contains("targets")) return nullptr;
  for (const auto& t : report["targets"]) {
    if (t["pid"] == pid) return &t;
  }
  return nullptr;
}

inline const nlohmann::json* kill_gpu(const nlohmann::json& report, unsigned index) {
  if (!report.contains("gpus")) return nullptr;
  for (const auto& g : report["gpus"]) {
    if (g["index"] == index) return &g;
  }
  return nullptr;
}

// The state letter of /proc/<pid>/stat, or 0 when the process is gone.
inline char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return 0;
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return 0;
  return text[close + 2];
}

// Alive and not a zombie: it was not ended.
inline bool running(pid_t pid) {
  const char s = process_state(pid);
  return s != 0 && s != 'Z' && s != 'X';
}

inline bool has_signal(const nlohmann::json& target, const std::string& name) {
  for (const auto& s : target["signals"]) {
    if (s == name) return true;
  }
  return false;
}

}  // namespace gpureap::test
