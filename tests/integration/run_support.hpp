// Helpers for the `gpureap run` tests: gpureap run started in the background (its stdout, the
// job's, read line by line for READY lines), waited for, its JSON report read back; and the
// scripts of simulated multi-rank jobs.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {

// gpureap run <args> --report <tmp> -- <command...>, in the background, in a session of its own
// (or ours, with same_session: a bystander can then join the job's process group).
class BackgroundRun {
 public:
  BackgroundRun(const SimHost& host, const std::vector<std::string>& run_args, const std::vector<std::string>& command,
                bool same_session = false, const std::vector<std::string>& prefix = {}) {
    const int n = counter()++;
    report_ = host.state_dir() + "/run-report-" + std::to_string(n) + ".json";
    // Not the test's own stderr: a job left running by a failed test would keep ctest's pipe open.
    stderr_ = host.state_dir() + "/run-stderr-" + std::to_string(n) + ".txt";
    std::vector<std::string> argv = prefix;
    argv.push_back(gpureap_binary());
    argv.push_back("run");
    argv.insert(argv.end(), run_args.begin(), run_args.end());
    argv.push_back("--report");
    argv.push_back(report_);
    argv.push_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    SpawnOptions options;
    options.env = host.env();
    options.env["SIM"] = GPUSIM_CUDA_BINARY;
    options.env["RECORDER"] = SIGNAL_RECORDER_BINARY;
    options.new_process_group = false;  // its own session below, or the test's (same_session)
    const PreparedExec exec(argv, options);  // no allocation after fork()
    const std::string stderr_path = stderr_;
    pid_ = fork();
    if (pid_ == 0) {
      if (!same_session) setsid();
      dup2(out[1], STDOUT_FILENO);
      const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) dup2(err, STDERR_FILENO);
      exec.exec_in_child(false);
    }
    close(out[1]);
    out_ = out[0];
  }
  BackgroundRun(const BackgroundRun&) = delete;
  BackgroundRun& operator=(const BackgroundRun&) = delete;

  ~BackgroundRun() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    for (pid_t pid : seen_) kill(pid, SIGKILL);
    // A job left behind by a failed test: its cgroup is ended and removed.
    const std::string cgroup = "/sys/fs/cgroup/unified/gpureap-run." + std::to_string(pid_);
    if (std::filesystem::exists(cgroup)) {
      std::ofstream(cgroup + "/cgroup.kill") << "1";
      eventually([&] { return rmdir(cgroup.c_str()) == 0; }, 2000);
    }
    close(out_);
  }

  pid_t pid() const { return pid_; }
  const std::string& report_path() const { return report_; }

  // The next line of the job's output starting with `prefix` (words after it), or fails.
  std::vector<std::string> line_starting(const std::string& prefix, int timeout_ms = 15000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      for (auto nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n')) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (line.rfind(prefix, 0) != 0) continue;
        std::istringstream words(line.substr(prefix.size()));
        std::vector<std::string> out;
        for (std::string w; words >> w;) out.push_back(w);
        return out;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) {
        ADD_FAILURE() << "no line starting with '" << prefix << "' from the job";
        return {};
      }
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[4096];
      const ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) {
        ADD_FAILURE() << "the job's output ended before a line starting with '" << prefix << "'";
        return {};
      }
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  // READY pid=<owner> nspid=<n> workers=<a,b> from gpusim-cuda: the owner and its workers.
  std::vector<pid_t> sim_ready() {
    std::vector<pid_t> pids;
    for (const auto& word : line_starting("READY ")) {
      const auto eq = word.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = word.substr(0, eq);
      std::stringstream values(word.substr(eq + 1));
      if (key != "pid" && key != "workers") continue;
      for (std::string v; std::getline(values, v, ',');) {
        if (!v.empty()) pids.push_back(std::stoi(v));
      }
    }
    for (pid_t p : pids) seen_.push_back(p);
    return pids;
  }

  void remember(pid_t pid) { seen_.push_back(pid); }

  // The exit status of gpureap run (-1 when it did not end in time or ended by a signal).
  int wait(int timeout_ms = 30000) {
    int status = 0;
    if (!eventually([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout_ms)) {
      ADD_FAILURE() << "gpureap run did not end within " << timeout_ms << " ms";
      return -1;
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // What gpureap run wrote on stderr (its summary).
  std::string stderr_text() const {
    std::ifstream in(stderr_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  nlohmann::json report() const {
    std::ifstream in(report_);
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().empty()) {
      ADD_FAILURE() << "no report in " << report_ << "; stderr: " << stderr_text();
      return nlohmann::json::object();
    }
    return nlohmann::json::parse(text.str());
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  pid_t pid_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string buffer_;
  std::string report_;
  std::string stderr_;
  std::vector<pid_t> seen_;
};

// A launcher starting `ranks` simulated ranks (each on GPU i%2, 1 GiB, with `workers` forked
// workers) in the background and waiting for them, then exiting with `exit_status`: what
// torchrun or mpirun does, without their timeouts.
inline std::vector<std::string> rank_launcher(int ranks, const std::string& rank_args, int exit_status = 0) {
  std::string script = "i=0; while [ $i -lt " + std::to_string(ranks) + " ]; do \"$SIM\" --alloc $((i % 2)):1GiB " +
                       rank_args + " & i=$((i + 1)); done; wait; exit " + std::to_string(exit_status);
  return {"/bin/sh", "-c", script};
}

inline const nlohmann::json* ended_entry(const nlohmann::json& report, pid_t pid) {
  for (const auto& e : report["left_and_ended"]) {
    if (e["pid"] == pid) return &e;
  }
  return nullptr;
}

inline void expect_memory_verified(const nlohmann::json& report) {
  ASSERT_FALSE(report["gpus"].empty()) << report.dump(2);
  for (const auto& gpu : report["gpus"]) {
    EXPECT_TRUE(gpu["verified_free"].get<bool>()) << gpu.dump(2);
  }
}

}  // namespace gpureap::test
