// What `gpureap kill` refuses to do, and says why: another user's process without the right to
// signal it, driver PIDs that do not name the GPU process here (foreign, mismatch), protected
// processes, and usage errors. In every case nothing is signalled.
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(KillPolicy, NonRootUserCannotEndRootsProcessAndNothingIsSignalled) {
  if (!running_as_root()) GTEST_SKIP() << "creating a user and switching to it needs root";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host;
  auto roots = host.start({"--alloc", "0:1GiB"});
  SpawnOptions options;
  options.env = host.env();
  options.uid = pw->pw_uid;
  const auto result = run_command({gpureap_binary(), "kill", std::to_string(roots.pid), "--yes", "--json"}, options);
  EXPECT_EQ(result.exit_code, 7) << result.out << result.err;
  const auto report = nlohmann::json::parse(result.out);
  const auto* t = kill_target(report, roots.pid);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["outcome"], "permission-denied");
  EXPECT_TRUE((*t)["signals"].empty());
  const std::string detail = (*t)["detail"];
  EXPECT_NE(detail.find("root"), std::string::npos) << detail;
  EXPECT_NE(detail.find("needs root"), std::string::npos) << detail;
  EXPECT_TRUE(running(roots.pid));

  // Their own process, they may end.
  auto theirs = host.start({"--alloc", "1:1GiB"}, pw->pw_uid);
  const auto own = run_command({gpureap_binary(), "kill", std::to_string(theirs.pid), "--yes", "--json"}, options);
  EXPECT_EQ(own.exit_code, 0) << own.out << own.err;
  EXPECT_FALSE(running(theirs.pid));
}

// The kernel lets a user signal a process whose real or saved uid is theirs, whatever its
// effective uid (a setuid program they started): the pre-check follows the kernel, not ps's USER.
TEST(KillPolicy, PermissionFollowsTheKernelRealAndSavedUid) {
  if (!running_as_root() || access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs root and setpriv(1)";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  const uid_t user = pw->pw_uid;
  SimHost host;
  // Real uid the user's, effective and saved root's.
  auto setuid_like = host.start_program(
      "/usr/bin/setpriv", {"--ruid", std::to_string(user), "--euid", "0", GPUSIM_CUDA_BINARY, "--alloc", "0:1GiB"});
  SpawnOptions options;
  options.env = host.env();
  options.uid = user;
  const auto result =
      run_command({gpureap_binary(), "kill", std::to_string(setuid_like.pid), "--yes", "--json"}, options);
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_FALSE(running(setuid_like.pid));
}

TEST(KillPolicy, ForeignDriverPidIsRefusedFromInsideAPidNamespace) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  SpawnOptions options;
  options.env = host.env();
  const auto result = run_command({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", gpureap_binary(), "kill",
                                   std::to_string(job.pid), "--yes", "--json"},
                                  options);
  EXPECT_EQ(result.exit_code, 8) << result.out << result.err;
  const auto report = nlohmann::json::parse(result.out);
  const auto* t = kill_target(report, job.pid);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["outcome"], "refused");
  EXPECT_EQ((*t)["refusal"]["kind"], "foreign");
  EXPECT_NE((*t)["refusal"]["message"].get<std::string>().find("--pid=host"), std::string::npos);
  EXPECT_TRUE(running(job.pid));

  // --gpu selects it too, and it is refused the same way.
  const auto by_gpu = run_command({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", gpureap_binary(), "kill",
                                   "--gpu", "0", "--yes", "--json"},
                                  options);
  EXPECT_EQ(by_gpu.exit_code, 8) << by_gpu.out << by_gpu.err;
  EXPECT_TRUE(running(job.pid));
}

TEST(KillPolicy, MismatchedPidIsRefusedAndTheStrangerIsNotSignalled) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  // Inside a fresh PID namespace, an unrelated `sleep` gets the GPU process's host PID.
  const std::string script =
      "echo \"$1\" > /proc/sys/kernel/ns_last_pid && { sleep 30 & } && "
      "\"$0\" kill \"$2\" --yes --json; rc=$?; kill -0 \"$2\" && echo STRANGER-ALIVE >&2; exit $rc";
  SpawnOptions options;
  options.env = host.env();
  const auto result = run_command({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "/bin/sh", "-c", script,
                                   gpureap_binary(), std::to_string(job.pid - 1), std::to_string(job.pid)},
                                  options);
  EXPECT_EQ(result.exit_code, 8) << result.out << result.err;
  const auto report = nlohmann::json::parse(result.out);
  const auto* t = kill_target(report, job.pid);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["outcome"], "refused");
  EXPECT_EQ((*t)["refusal"]["kind"], "mismatch") << t->dump(2);
  EXPECT_NE(result.err.find("STRANGER-ALIVE"), std::string::npos) << "the sleep with that PID was not signalled";
  EXPECT_TRUE(running(job.pid));
}

TEST(KillPolicy, ProtectedProcessIsRefusedUnlessForced) {
  SimHost host;
  auto smi = host.start_program(host.sim_binary_named("nvidia-smi"), {"--alloc", "0:1GiB"});
  int rc = -1;
  auto report = kill_json(host, {std::to_string(smi.pid), "--yes"}, &rc);
  EXPECT_EQ(rc, 8) << report.dump(2);
  const auto* t = kill_target(report, smi.pid);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ((*t)["refusal"]["kind"], "protected");
  EXPECT_NE((*t)["refusal"]["message"].get<std::string>().find("--force"), std::string::npos);
  EXPECT_TRUE(running(smi.pid));

  // --gpu takes everything on the GPU except the protected process.
  auto job = host.start({"--alloc", "0:1GiB"});
  report = kill_json(host, {"--gpu", "0", "--yes"}, &rc);
  EXPECT_EQ(rc, 8) << report.dump(2);
  EXPECT_EQ((*kill_target(report, job.pid))["outcome"], "exited");
  EXPECT_EQ((*kill_target(report, smi.pid))["outcome"], "refused");
  EXPECT_TRUE((*kill_gpu(report, 0))["verified"].get<bool>());
  EXPECT_TRUE(running(smi.pid));

  report = kill_json(host, {std::to_string(smi.pid), "--yes", "--force"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_EQ((*kill_target(report, smi.pid))["outcome"], "exited");

  // --protect adds names.
  auto trainer = host.start({"--name", "mytrainer", "--alloc", "0:1GiB"});
  report = kill_json(host, {std::to_string(trainer.pid), "--yes", "--protect", "mytrainer"}, &rc);
  EXPECT_EQ(rc, 8);
  EXPECT_TRUE(running(trainer.pid));

  // So does the configuration file, which also names the audit log.
  const std::string config = host.config_dir() + "/config.toml";
  const std::string log = host.state_dir() + "/config-audit.log";
  std::ofstream(config) << "[kill]\nprotect = [\"mytrain*\"]\naudit_log = \"" << log << "\"\n";
  report = kill_json(host, {std::to_string(trainer.pid), "--yes"}, &rc, nullptr, {{"GPUREAP_CONFIG", config}});
  EXPECT_EQ(rc, 8) << report.dump(2);
  EXPECT_EQ((*kill_target(report, trainer.pid))["refusal"]["kind"], "protected");
  EXPECT_TRUE(running(trainer.pid));
  auto other = host.start({"--alloc", "0:1GiB"});
  report = kill_json(host, {std::to_string(other.pid), "--yes"}, &rc, nullptr, {{"GPUREAP_CONFIG", config}});
  EXPECT_EQ(rc, 0) << report.dump(2);
  std::ifstream audit(log);
  std::string line;
  EXPECT_TRUE(std::getline(audit, line)) << "the configured audit log was written";
  std::ofstream(config) << "[kill\n";
  EXPECT_EQ(host.gpureap({"kill", "--all", "--yes"}, {{"GPUREAP_CONFIG", config}}).exit_code, 2);
}

// A job script with a GPU worker and an `nvidia-smi` it launched: ending the script ends the
// worker, and the protected child survives even though the tree is swept.
TEST(KillPolicy, ProtectedDescendantSurvivesTheTreeKill) {
  SimHost host;
  const std::string script =
      "\"$1/bin/nvidia-smi\" --nvml-client > \"$1/smi\" & \"$0\" --alloc 0:1GiB > \"$1/job\" & wait";
  host.sim_binary_named("nvidia-smi");
  const pid_t shell = fork();
  if (shell == 0) {
    setpgid(0, 0);
    for (const auto& [k, v] : host.env()) setenv(k.c_str(), v.c_str(), 1);
    execl("/bin/sh", "sh", "-c", script.c_str(), GPUSIM_CUDA_BINARY, host.state_dir().c_str(), nullptr);
    _exit(127);
  }
  setpgid(shell, shell);
  auto ready_pid = [&](const std::string& name) {
    std::string line;
    eventually([&] {
      std::ifstream in(host.state_dir() + "/" + name);
      return std::getline(in, line) && line.rfind("READY", 0) == 0;
    }, 10000);
    return line.empty() ? -1 : static_cast<pid_t>(std::stol(line.substr(line.find("pid=") + 4)));
  };
  const pid_t smi = ready_pid("smi");
  const pid_t job = ready_pid("job");
  ASSERT_GT(smi, 0);
  ASSERT_GT(job, 0);
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(shell), "--yes"}, &rc);
  EXPECT_EQ(rc, 8) << report.dump(2);
  ASSERT_NE(kill_target(report, smi), nullptr) << report.dump(2);
  EXPECT_EQ((*kill_target(report, smi))["refusal"]["kind"], "protected");
  EXPECT_EQ((*kill_target(report, job))["outcome"], "exited");
  EXPECT_TRUE((*kill_gpu(report, 0))["verified"].get<bool>());
  EXPECT_TRUE(running(smi));
  kill(-shell, SIGKILL);
  kill(smi, SIGKILL);
  waitpid(shell, nullptr, 0);
}

TEST(KillPolicy, GpureapNeverEndsItsOwnAncestorsOrInit) {
  SimHost host;
  int rc = -1;
  // The test binary is gpureap's parent.
  auto report = kill_json(host, {std::to_string(getpid()), "1", "--yes"}, &rc);
  EXPECT_EQ(rc, 8) << report.dump(2);
  EXPECT_EQ((*kill_target(report, getpid()))["refusal"]["kind"], "ancestor");
  EXPECT_EQ((*kill_target(report, 1))["refusal"]["kind"], "pid-1");
}

// On a terminal (script(1) gives gpureap a pty) a kill of more than one process asks first;
// "n" ends gpureap with 10 and nothing signalled, "y" proceeds.
TEST(KillPolicy, TerminalIsAskedToConfirmAndNoSignalsNothing) {
  if (access("/usr/bin/script", X_OK) != 0) GTEST_SKIP() << "needs script(1) from util-linux for a pty";
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  SpawnOptions options;
  options.env = host.env();
  const std::string command = gpureap_binary() + " kill " + std::to_string(job.pid);
  auto answer = [&](const char* reply) {
    return run_command({"/bin/sh", "-c", std::string("printf '") + reply + "\\n' | /usr/bin/script -qec \"$0\" /dev/null",
                        command},
                       options);
  };
  const auto no = answer("n");
  EXPECT_EQ(no.exit_code, 10) << no.out << no.err;
  EXPECT_NE(no.out.find("Proceed? [y/N]"), std::string::npos) << no.out;
  EXPECT_TRUE(running(job.pid));
  EXPECT_TRUE(running(job.workers.at(0)));
  const auto yes = answer("y");
  EXPECT_EQ(yes.exit_code, 0) << yes.out << yes.err;
  EXPECT_FALSE(running(job.pid));
}

TEST(KillPolicy, UsageErrorsAndEmptySelections) {
  SimHost host;
  EXPECT_EQ(host.gpureap({"kill"}).exit_code, 2) << "nothing named";
  EXPECT_EQ(host.gpureap({"kill", "--all", "--signal", "NOPE"}).exit_code, 2);
  EXPECT_EQ(host.gpureap({"kill", "--gpu", "7"}).exit_code, 2);
  EXPECT_EQ(host.gpureap({"kill", "--name", "(unclosed"}).exit_code, 2);
  const auto none = host.gpureap({"kill", "--name", "no-such-command-anywhere", "--yes"});
  EXPECT_EQ(none.exit_code, 9);
  EXPECT_NE(none.err.find("nothing matched"), std::string::npos);
  EXPECT_EQ(host.gpureap({"kill", "--all", "--yes"}).exit_code, 9) << "no GPU process at all";
}

}  // namespace
}  // namespace gpureap::test
