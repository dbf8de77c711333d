// Processes that share a host with a destructive command's targets and must come out of it
// untouched, and the orphans some of those commands exist to end. Shared by doctor --fix and
// top's tests.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {

// A job whose owner was SIGKILLed while its 2 forked workers keep the context (and the memory)
// alive: the driver still lists the dead owner; the workers are orphans.
inline SimProcess orphaned_job(const SimHost& host, const std::string& alloc) {
  auto job = host.start({"--alloc", alloc, "--workers", "2"});
  EXPECT_EQ(kill(job.pid, SIGKILL), 0);
  job.wait_exit();
  EXPECT_TRUE(eventually([&] { return !running(job.pid); }));
  return job;
}

// A service as systemd starts one: its own session (setsid), parent PID 1 (or a subreaper),
// holding a GPU device file. Ended (SIGKILL) when the test ends.
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
