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

// The audit log's JSON lines.
inline std::vector<nlohmann::json> audit_lines(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// How many audit lines record `signal` for `pid` at `stage` ("sending": announced before it is
// sent; "sent": the attempt), with `result` where one is given ("delivered").
inline int audit_count(const std::vector<nlohmann::json>& lines, pid_t pid, const std::string& signal,
                       const std::string& stage, const std::string& result = "") {
  int n = 0;
  for (const auto& l : lines) {
    n += l.value("pid", 0) == pid && l.value("signal", "") == signal && l.value("stage", "") == stage &&
                 (result.empty() || l.value("result", "") == result)
             ? 1
             : 0;
  }
  return n;
}

// `signal` was delivered to `pid`, by the audit log.
inline bool audited(const std::vector<nlohmann::json>& lines, pid_t pid, const std::string& signal) {
  return audit_count(lines, pid, signal, "sent", "delivered") > 0;
}

// A job whose owner was SIGKILLed while its forked workers keep the GPU memory: the workers are
// orphans (the driver still lists the dead owner, their process-group leader).
inline SimProcess orphaned_job(const SimHost& host, const std::string& alloc) {
  auto job = host.start({"--alloc", alloc, "--workers", "2"});
  EXPECT_EQ(kill(job.pid, SIGKILL), 0);
  job.wait_exit();
  EXPECT_TRUE(eventually([&] { return !running(job.pid); }));
  return job;
}

// A service as systemd starts one: its own session (setsid), parent PID 1 (or a subreaper),
// holding a GPU device file. PPID 1 proves nothing: it is no orphan. Ended (SIGKILL) when the
// test ends.
struct Service {
  pid_t pid = -1;
  explicit Service(const SimHost& host) {
    const std::string pid_file = host.state_dir() + "/service.pid";
    const auto started = run_command({"/usr/bin/setsid", "-f", "/bin/sh", "-c",
                                      "echo $$ > \"$0\"; exec sleep 1000 3<\"$1\" </dev/null >/dev/null 2>&1", pid_file,
                                      host.dev_dir() + "/nvidia0"});
    EXPECT_EQ(started.exit_code, 0) << started.err;
    EXPECT_TRUE(eventually([&] {
      std::ifstream in(pid_file);
      return static_cast<bool>(in >> pid) && pid > 0;
    }));
    // Holding the file (the shell has exec'd sleep with it open).
    EXPECT_TRUE(eventually([&] { return find_holder(host.ps_json(), pid) != nullptr; })) << "service " << pid;
  }
  ~Service() {
    if (pid > 0) ::kill(pid, SIGKILL);
  }
};

}  // namespace gpureap::test
