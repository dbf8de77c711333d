// One confirmation rule for `kill` and `doctor --fix`: a plan that needs it is asked about on
// the controlling terminal even when output or input is a pipe; with no terminal at all it
// proceeds only with --yes (exit 10 otherwise), and nothing is signalled before.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "doctor_support.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

bool have_script() { return access("/usr/bin/script", X_OK) == 0; }

// Runs `shell_line` (bash, pipefail; $GPUREAP is the binary) under a pseudo-terminal made by
// script(1), typing `reply` into it.
CommandResult on_a_terminal(const SimHost& host, const std::string& shell_line, const std::string& reply) {
  const std::string path = host.state_dir() + "/on-terminal.sh";
  std::ofstream(path) << "#!/bin/bash\nset -o pipefail\nGPUREAP='" << gpureap_binary() << "'\n" << shell_line << "\n";
  chmod(path.c_str(), 0755);
  SpawnOptions options;
  options.env = host.env();
  return run_command({"/bin/sh", "-c", "printf '%s\\n' \"$1\" | /usr/bin/script -qec \"$0\" /dev/null", path, reply},
                     options);
}

TEST(Confirmation, KillWithPipedOutputAsksOnTheTerminal) {
  if (!have_script()) GTEST_SKIP() << "needs script(1) from util-linux for a pseudo-terminal";
  SimHost host;
  auto a = host.start({"--alloc", "0:1GiB"});
  auto b = host.start({"--alloc", "1:1GiB"});
  const auto no = on_a_terminal(host, "\"$GPUREAP\" kill --all | cat", "n");
  EXPECT_EQ(no.exit_code, 10) << no.out << no.err;
  EXPECT_NE(no.out.find("Proceed? [y/N]"), std::string::npos) << no.out;
  EXPECT_NE(no.out.find("not confirmed"), std::string::npos) << no.out;
  EXPECT_TRUE(running(a.pid));
  EXPECT_TRUE(running(b.pid));
  const auto yes = on_a_terminal(host, "\"$GPUREAP\" kill --all < /dev/null | cat", "y");
  EXPECT_EQ(yes.exit_code, 0) << yes.out << yes.err;
  EXPECT_FALSE(running(a.pid));
  EXPECT_FALSE(running(b.pid));
}

TEST(Confirmation, KillWithoutATerminalNeedsYes) {
  SimHost host;
  auto a = host.start({"--alloc", "0:1GiB"});
  auto b = host.start({"--alloc", "1:1GiB"});
  SpawnOptions options;
  options.env = host.env();
  const auto refused = run_command({"/usr/bin/setsid", "-w", gpureap_binary(), "kill", "--all"}, options);
  EXPECT_EQ(refused.exit_code, 10) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("add --yes"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--dry-run"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find('\n'), refused.err.size() - 1) << "one line: " << refused.err;
  EXPECT_TRUE(running(a.pid));
  EXPECT_TRUE(running(b.pid));
  // One process of one's own needs no confirmation.
  const auto one = run_command({"/usr/bin/setsid", "-w", gpureap_binary(), "kill", std::to_string(a.pid)}, options);
  EXPECT_EQ(one.exit_code, 0) << one.out << one.err;
  EXPECT_FALSE(running(a.pid));
  EXPECT_TRUE(running(b.pid));
  auto c = host.start({"--alloc", "0:1GiB"});
  const auto yes = run_command({"/usr/bin/setsid", "-w", gpureap_binary(), "kill", "--all", "--yes"}, options);
  EXPECT_EQ(yes.exit_code, 0) << yes.out << yes.err;
  EXPECT_FALSE(running(b.pid));
  EXPECT_FALSE(running(c.pid));
}

TEST(Confirmation, DoctorFixWithStdinPipedAsksOnTheTerminal) {
  if (!have_script()) GTEST_SKIP() << "needs script(1) from util-linux for a pseudo-terminal";
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  ASSERT_EQ(kill(job.pid, SIGKILL), 0);
  job.wait_exit();
  const auto no = on_a_terminal(host, "\"$GPUREAP\" doctor --no-kernel-log --fix < /dev/null | cat", "n");
  EXPECT_EQ(no.exit_code, 10) << no.out << no.err;
  EXPECT_NE(no.out.find("Apply these fixes? [y/N]"), std::string::npos) << no.out;
  EXPECT_TRUE(running(job.workers.at(0)));
}

}  // namespace
}  // namespace gpureap::test
