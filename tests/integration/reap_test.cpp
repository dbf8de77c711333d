// `gpureap reap`: job-end cleanup ends what the job provably owns (its cgroup, or its user's GPU
// processes) and nothing else, verifies the GPUs are back to baseline, and names what remains.
// Real processes under the simulator, the real binary.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cgroup_support.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

nlohmann::json reap_json(const SimHost& host, std::vector<std::string> args, int* exit_code, std::string* err = nullptr) {
  std::vector<std::string> argv = {"reap"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--json");
  return host.gpureap_json(argv, exit_code, {}, err);
}

const nlohmann::json* reap_gpu(const nlohmann::json& report, unsigned index) {
  for (const auto& g : report["gpus"]) {
    if (g["index"] == index) return &g;
  }
  return nullptr;
}

// `sleep 1000` as `uid` in its own process group: a user's process that uses no GPU. Killed
// and reaped on destruction.
struct PlainProcess {
  pid_t pid = -1;
  explicit PlainProcess(uid_t uid) {
    pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      if (setgid(uid) != 0 || setuid(uid) != 0) _exit(3);
      execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~PlainProcess() {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

TEST(Reap, UserOnGivenGpusEndsTheJobAndItsWorkersAndNothingElse) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user's processes";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host;
  auto job = host.start({"--alloc", "0:2GiB", "--workers", "2"}, pw->pw_uid);
  ASSERT_EQ(job.workers.size(), 2u);
  auto other_user = host.start({"--alloc", "0:1GiB"});  // root's, on the same GPU
  auto same_user_other_gpu = host.start({"--alloc", "1:1GiB"}, pw->pw_uid);
  const PlainProcess shell(pw->pw_uid);
  const std::string audit = host.state_dir() + "/reap-audit.log";

  int rc = -1;
  const auto report = reap_json(host, {"--user", kTestUserName, "--gpus", "0", "--audit-log", audit}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  for (pid_t pid : {job.pid, job.workers[0], job.workers[1]}) {
    EXPECT_TRUE(eventually([&] { return !running(pid); })) << "PID " << pid << " survived";
    EXPECT_NE(kill_target(report, pid), nullptr) << pid << report.dump(2);
  }
  EXPECT_TRUE(running(other_user.pid)) << "another user's GPU process was ended";
  EXPECT_TRUE(running(same_user_other_gpu.pid)) << "the user's process on an unselected GPU was ended";
  EXPECT_TRUE(running(shell.pid)) << "the user's process that uses no GPU was ended";
  EXPECT_EQ(kill_target(report, shell.pid), nullptr);
  const auto* gpu = reap_gpu(report, 0);
  ASSERT_NE(gpu, nullptr) << report.dump(2);
  EXPECT_TRUE((*gpu)["verified"].get<bool>()) << report.dump(2);
  EXPECT_EQ((*gpu)["outside_bytes"], 1 * GiB) << "the other user's memory is not the job's";
  EXPECT_EQ(reap_gpu(report, 1), nullptr) << "only the selected GPU is verified";
  EXPECT_TRUE(report["survivors"].empty());

  const auto lines = audit_lines(audit);
  for (pid_t pid : {job.pid, job.workers[0], job.workers[1]}) EXPECT_TRUE(audited(lines, pid, "SIGTERM")) << pid;
  for (const auto& l : lines) EXPECT_NE(l.value("pid", 0), other_user.pid);
}

TEST(Reap, CgroupEndsWhatIsInItAndLeavesAGpuProcessOutside) {
  OwnCgroup cgroup("reap");
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  SimHost host;
  auto job = host.start({"--alloc", "0:2GiB", "--workers", "2"});
  auto outside = host.start({"--alloc", "0:1GiB"});
  for (pid_t pid : {job.pid, job.workers[0], job.workers[1]}) ASSERT_TRUE(cgroup.adopt(pid));
  const pid_t no_gpu = cgroup.start_shell("exec sleep 1000");  // the job's, though it uses no GPU
  ASSERT_TRUE(eventually([&] { return cgroup.pids().size() == 4; }));

  int rc = -1;
  // Relative to the v2 mount, as /proc/PID/cgroup shows it.
  const std::string relative = cgroup.path().substr(cgroup.path().rfind('/'));
  const auto report = reap_json(host, {"--cgroup", relative}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  for (pid_t pid : {job.pid, job.workers[0], job.workers[1]}) {
    EXPECT_TRUE(eventually([&] { return !running(pid); })) << "PID " << pid << " survived";
  }
  EXPECT_TRUE(eventually([&] { return !running(no_gpu); })) << "the cgroup's process without a GPU survived";
  waitpid(no_gpu, nullptr, 0);
  EXPECT_TRUE(running(outside.pid)) << "a GPU process outside the cgroup was ended";
  EXPECT_EQ(report["criteria"]["cgroup"], cgroup.path());
  const auto* gpu = reap_gpu(report, 0);
  ASSERT_NE(gpu, nullptr) << report.dump(2);
  EXPECT_TRUE((*gpu)["verified"].get<bool>()) << report.dump(2);
  EXPECT_TRUE(cgroup.pids().empty());
}

TEST(Reap, AStuckProcessIsNamedWithItsStateAndTheExitStatusIs6) {
  OwnCgroup cgroup("reap-stuck");
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  ASSERT_TRUE(cgroup.adopt(job.pid));
  const FrozenInD frozen(job.pid);
  if (!frozen.why_not.empty()) GTEST_SKIP() << frozen.why_not;
  ASSERT_TRUE(eventually([&] { return process_state(job.pid) == 'D'; })) << "state " << process_state(job.pid);

  int rc = -1;
  const auto report =
      reap_json(host, {"--cgroup", cgroup.path(), "--kill-timeout", "200ms", "--verify-timeout", "500ms"}, &rc);
  EXPECT_EQ(rc, 6) << report.dump(2);
  ASSERT_EQ(report["survivors"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["survivors"][0]["pid"], job.pid);
  EXPECT_EQ(report["survivors"][0]["state"], "D");
  EXPECT_FALSE(report["survivors"][0]["wchan"].is_null()) << report.dump(2);
  const auto* gpu = reap_gpu(report, 0);
  ASSERT_NE(gpu, nullptr);
  EXPECT_FALSE((*gpu)["verified"].get<bool>());

  // What a person (or slurmd's log) reads: the survivor's PID and state on one line.
  const auto text = host.gpureap({"reap", "--cgroup", cgroup.path(), "--kill-timeout", "0", "--verify-timeout", "0"});
  EXPECT_EQ(text.exit_code, 6) << text.out << text.err;
  EXPECT_NE(text.out.find("survivor PID " + std::to_string(job.pid)), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("state D"), std::string::npos) << text.out;
}

TEST(Reap, GpusByUuidAndByRange) {
  SimHost host({"--gpus", "4"});
  auto on0 = host.start({"--alloc", "0:1GiB"});
  auto on1 = host.start({"--alloc", "1:1GiB"});
  auto on2 = host.start({"--alloc", "2:1GiB"});
  auto on3 = host.start({"--alloc", "3:1GiB"});
  const std::string uuid1 = gpu_entry(host.ps_json(), 1)["uuid"];
  const std::string me = std::to_string(getuid());

  int rc = -1;
  auto report = reap_json(host, {"--uid", me, "--gpus", uuid1}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(on1.pid); }));
  EXPECT_TRUE(running(on0.pid) && running(on2.pid) && running(on3.pid));

  report = reap_json(host, {"--uid", me, "--gpus", "2-3"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(on2.pid) && !running(on3.pid); }));
  EXPECT_TRUE(running(on0.pid));
  EXPECT_NE(reap_gpu(report, 2), nullptr);
  EXPECT_NE(reap_gpu(report, 3), nullptr);
}

TEST(Reap, BadInputIsOneLineAndExit2WithNothingSignalled) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string me = std::to_string(getuid());
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"reap", "--uid", me, "--gpus", "7"}, "--gpus 7: no such GPU"},
      {{"reap", "--uid", me, "--gpus", "GPU-00000000-dead"}, "no GPU on this host has that UUID"},
      {{"reap", "--user", "no-such-user-gpureap"}, "no such user"},
      {{"reap", "--cgroup", "/gpureap-no-such-cgroup-" + me}, "no such cgroup"},
      {{"reap", "--gpus", "0"}, "--gpus alone does not prove whose process it is"},
      {{"reap", "--uid", me, "--kill-timeout", "nan"}, "--kill-timeout nan"},
  };
  for (const auto& [argv, expected] : cases) {
    const auto result = host.gpureap(argv);
    EXPECT_EQ(result.exit_code, 2) << argv.back() << ": " << result.err;
    EXPECT_NE(result.err.find(expected), std::string::npos) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;
    EXPECT_TRUE(running(job.pid)) << "signalled on bad input: " << argv.back();
  }
}

TEST(Reap, DryRunSignalsNothingAndExceptSparesByName) {
  SimHost host;
  auto trainer = host.start_program(host.sim_binary_named("trainer"), {"--alloc", "0:1GiB"});
  auto keeper = host.start_program(host.sim_binary_named("keeper"), {"--alloc", "0:1GiB"});
  const std::string me = std::to_string(getuid());

  int rc = -1;
  auto report = reap_json(host, {"--uid", me, "--gpus", "0", "--dry-run"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(report["dry_run"].get<bool>());
  ASSERT_NE(kill_target(report, trainer.pid), nullptr) << report.dump(2);
  EXPECT_EQ((*kill_target(report, trainer.pid))["outcome"], "planned");
  EXPECT_TRUE(running(trainer.pid) && running(keeper.pid)) << "--dry-run signalled";

  report = reap_json(host, {"--uid", me, "--gpus", "0", "--except", "keeper", "--verify-timeout", "2"}, &rc);
  EXPECT_TRUE(eventually([&] { return !running(trainer.pid); }));
  EXPECT_TRUE(running(keeper.pid)) << "--except keeper ended keeper";
  ASSERT_EQ(report["spared"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["spared"][0]["pid"], keeper.pid);
  EXPECT_EQ(report["spared"][0]["reason"], "--except keeper");
  // Spared, but the 1 GiB it holds is the job's: the GPU is not called empty.
  EXPECT_EQ(rc, 6) << report.dump(2);
  ASSERT_EQ(report["gpus"].size(), 1u);
  EXPECT_FALSE(report["gpus"][0]["verified"].get<bool>());
  EXPECT_EQ(report["gpus"][0]["still_listed"], nlohmann::json::array({keeper.pid}));
}

// A binary upgraded (deleted) under a running process reads "/path/keeper (deleted)" in
// /proc/PID/exe: it is still the keeper, and --except keeper still spares it.
TEST(Reap, ExceptSparesAProcessWhoseBinaryWasReplaced) {
  SimHost host;
  const std::string program = host.sim_binary_named("keeper");
  auto keeper = host.start_program(program, {"--alloc", "0:1GiB"});
  ASSERT_EQ(unlink(program.c_str()), 0);
  int rc = -1;
  const auto report =
      reap_json(host, {"--uid", std::to_string(getuid()), "--gpus", "0", "--except", "keeper", "--verify-timeout", "1"}, &rc);
  EXPECT_TRUE(running(keeper.pid)) << "--except keeper ended a keeper whose binary was replaced: " << report.dump(2);
  ASSERT_EQ(report["spared"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["spared"][0]["pid"], keeper.pid);
}

// A process chooses its own comm: naming itself like an --except name must not let it escape.
TEST(Reap, ExceptMatchesTheExecutableNeverTheProcessName) {
  SimHost host;
  auto impostor = host.start({"--alloc", "0:1GiB", "--name", "keeper"});
  ASSERT_EQ(process_state(impostor.pid) != 0, true);
  int rc = -1;
  const auto report =
      reap_json(host, {"--uid", std::to_string(getuid()), "--gpus", "0", "--except", "keeper"}, &rc);
  EXPECT_TRUE(report["spared"].empty()) << report.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(impostor.pid); })) << "a comm of 'keeper' escaped the reap";
  EXPECT_EQ(rc, 0) << report.dump(2);
}

// deploy/slurm/epilog.sh as slurmd runs it (root, the job's environment), against a job cgroup
// the test creates at <root>/system.slice/slurmstepd.scope/job_<id>.
CommandResult run_epilog(const SimHost& host, const std::string& cgroup_root, const std::string& job,
                         const std::string& gpus, const std::map<std::string, std::string>& extra_env = {}) {
  SpawnOptions options;
  options.env = host.env();
  for (const auto& [key, value] : extra_env) options.env[key] = value;
  options.env["SLURM_JOB_ID"] = job;
  options.env["SLURM_JOB_UID"] = std::to_string(getuid());
  options.env["SLURM_JOB_GPUS"] = gpus;
  options.env["GPUREAP"] = gpureap_binary();
  options.env["GPUREAP_CGROUP_ROOT"] = cgroup_root;
  options.env["GPUREAP_AUDIT_LOG"] = host.state_dir() + "/epilog-audit.log";
  options.env["GPUREAP_KILL_TIMEOUT"] = "300ms";
  options.env["GPUREAP_VERIFY_TIMEOUT"] = "2s";
  return run_command({"/bin/bash", std::string(GPUREAP_DEPLOY_DIR) + "/slurm/epilog.sh"}, options);
}

// deploy/slurm/prolog.sh before a job on the GPUs in SLURM_JOB_GPUS: exit 0 when they are free,
// non-zero naming the GPU and the PID when a previous job's process still holds one.
TEST(SlurmProlog, RefusesAGpuThatStillHoldsAProcessAndPassesAFreeOne) {
  if (access("/usr/bin/jq", X_OK) != 0) GTEST_SKIP() << "the prolog needs jq (scripts/setup-deps.sh installs it)";
  SimHost host;
  auto leftover = host.start({"--alloc", "0:2GiB"});
  auto run_prolog = [&](const std::string& gpus) {
    SpawnOptions options;
    options.env = host.env();
    options.env["SLURM_JOB_ID"] = "44";
    options.env["SLURM_JOB_GPUS"] = gpus;
    options.env["GPUREAP"] = gpureap_binary();
    return run_command({"/bin/bash", std::string(GPUREAP_DEPLOY_DIR) + "/slurm/prolog.sh"}, options);
  };
  const auto free_gpu = run_prolog("1");
  EXPECT_EQ(free_gpu.exit_code, 0) << free_gpu.err;
  const auto busy = run_prolog("0,1");
  EXPECT_NE(busy.exit_code, 0) << busy.err;
  EXPECT_NE(busy.err.find("GPU 0"), std::string::npos) << busy.err;
  EXPECT_NE(busy.err.find(std::to_string(leftover.pid)), std::string::npos) << busy.err;
  EXPECT_EQ(busy.err.find("GPU 1"), std::string::npos) << busy.err;
  EXPECT_TRUE(running(leftover.pid)) << "a prolog only looks";
  const auto hostile = run_prolog("0;id");
  EXPECT_EQ(hostile.exit_code, 2) << hostile.err;
}

TEST(SlurmEpilog, EndsTheJobsCgroupLeavesTheNextJobAndDrainsWhenSomethingSurvives) {
  OwnCgroup cgroup("slurm");
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  SimHost host;
  const std::string scope = "system.slice/slurmstepd.scope/";
  const std::string job42 = cgroup.make_child(scope + "job_42/step_0");
  const std::string job43 = cgroup.make_child(scope + "job_43/step_0");
  auto ended = host.start({"--alloc", "0:2GiB", "--workers", "1"});
  auto next_job = host.start({"--alloc", "0:1GiB"});  // same user, same GPU, another job
  for (pid_t pid : {ended.pid, ended.workers[0]}) ASSERT_TRUE(cgroup.adopt_into(job42, pid));
  ASSERT_TRUE(cgroup.adopt_into(job43, next_job.pid));

  const auto result = run_epilog(host, cgroup.path(), "42", "0");
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_TRUE(eventually([&] { return !running(ended.pid) && !running(ended.workers[0]); })) << result.err;
  EXPECT_TRUE(running(next_job.pid)) << "the epilog of job 42 ended job 43's process: " << result.err;
  EXPECT_NE(result.err.find("back to baseline"), std::string::npos) << result.err;
  std::ifstream audit(host.state_dir() + "/epilog-audit.log");
  std::stringstream lines;
  lines << audit.rdbuf();
  EXPECT_NE(lines.str().find("\"pid\":" + std::to_string(ended.pid)), std::string::npos) << lines.str();

  // Job 43's process stuck in D: the epilog exits non-zero (Slurm drains) and names it.
  const FrozenInD frozen(next_job.pid);
  if (!frozen.why_not.empty()) GTEST_SKIP() << frozen.why_not;
  ASSERT_TRUE(eventually([&] { return process_state(next_job.pid) == 'D'; }));
  const auto stuck = run_epilog(host, cgroup.path(), "43", "0");
  EXPECT_EQ(stuck.exit_code, 6) << stuck.out << stuck.err;
  EXPECT_NE(stuck.err.find("survivor PID " + std::to_string(next_job.pid)), std::string::npos) << stuck.err;
  EXPECT_NE(stuck.err.find("Slurm drains this node"), std::string::npos) << stuck.err;
}

// An AMD-only node (no NVIDIA GPU, no NVIDIA library; the simulated DRM driver): the prolog
// passes while the GPUs are free and refuses a job while a previous job's ROCm process holds
// one, naming its PCI address and PID. Slurm's indices (gres.conf's order) name no GPU there:
// every AMD GPU of the node is checked.
TEST(SlurmProlog, AnAmdOnlyNodePassesWhenFreeAndRefusesALeftover) {
  if (access("/usr/bin/jq", X_OK) != 0) GTEST_SKIP() << "the prolog needs jq (scripts/setup-deps.sh installs it)";
  SimHost host({"--gpus", "0"});
  const std::string pci = "0000:c1:00.0";
  host.add_drm_gpu({.pci = pci, .kfd = true});
  auto run_prolog = [&] {
    SpawnOptions options;
    options.env = host.env();
    options.env["GPUREAP_NVML_LIBRARY"] = host.state_dir() + "/no/libnvidia-ml.so.1";
    options.env["SLURM_JOB_ID"] = "45";
    options.env["SLURM_JOB_GPUS"] = "0";
    options.env["GPUREAP"] = gpureap_binary();
    return run_command({"/bin/bash", std::string(GPUREAP_DEPLOY_DIR) + "/slurm/prolog.sh"}, options);
  };
  const auto free_node = run_prolog();
  EXPECT_EQ(free_node.exit_code, 0) << free_node.err;
  EXPECT_EQ(free_node.err, "") << "a clean AMD node is normal: nothing to say";
  auto leftover = host.start_drm_client({"--node", "renderD128", "--vram", "2GiB", "--kfd"});
  ASSERT_GT(leftover.pid, 0) << leftover.ready_line;
  const auto busy = run_prolog();
  EXPECT_EQ(busy.exit_code, 1) << busy.err;
  EXPECT_NE(busy.err.find("GPU " + pci), std::string::npos) << busy.err;
  EXPECT_NE(busy.err.find(std::to_string(leftover.pid)), std::string::npos) << busy.err;
  EXPECT_TRUE(running(leftover.pid)) << "a prolog only looks";
}

// The epilog on an AMD-only node: the job's cgroup is ended and the release verified, exit 0;
// the next job of the same user, in its own cgroup, runs on. Slurm's "0" is not taken for an
// NVIDIA index (which would fail the epilog and drain every AMD node after every job).
TEST(SlurmEpilog, OnAnAmdOnlyNodeEndsTheJobsCgroupAndLeavesTheNextJob) {
  OwnCgroup cgroup("slurm-amd");
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  if (access("/usr/bin/jq", X_OK) != 0) GTEST_SKIP() << "needs jq";
  SimHost host({"--gpus", "0"});
  host.add_drm_gpu({.pci = "0000:c1:00.0", .kfd = true});
  const std::string scope = "system.slice/slurmstepd.scope/";
  const std::string job46 = cgroup.make_child(scope + "job_46/step_0");
  const std::string job47 = cgroup.make_child(scope + "job_47/step_0");
  auto ended = host.start_drm_client({"--node", "renderD128", "--vram", "2GiB", "--kfd", "--workers", "1"});
  auto next_job = host.start_drm_client({"--node", "renderD128", "--vram", "1GiB", "--kfd"});
  ASSERT_GT(ended.pid, 0) << ended.ready_line;
  for (pid_t pid : {ended.pid, ended.workers.at(0)}) ASSERT_TRUE(cgroup.adopt_into(job46, pid));
  ASSERT_TRUE(cgroup.adopt_into(job47, next_job.pid));
  const auto result =
      run_epilog(host, cgroup.path(), "46", "0", {{"GPUREAP_NVML_LIBRARY", host.state_dir() + "/no/libnvidia-ml.so.1"}});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_TRUE(eventually([&] { return !running(ended.pid) && !running(ended.workers.at(0)); })) << result.err;
  EXPECT_TRUE(running(next_job.pid)) << "the epilog of job 46 ended job 47's process: " << result.err;
}

TEST(Reap, WithoutTheRightToSignalAnotherUsersProcessesItIsExit7NeverBackToBaseline) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user runs reap";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  OwnCgroup cgroup("reap-denied");
  SimHost host;
  auto roots = host.start({"--alloc", "0:1GiB"});
  SpawnOptions options;
  options.env = host.env();
  options.uid = pw->pw_uid;
  const auto by_user = run_command({gpureap_binary(), "reap", "--user", "root", "--gpus", "0"}, options);
  EXPECT_EQ(by_user.exit_code, 7) << by_user.out << by_user.err;
  EXPECT_EQ(by_user.out.find("baseline"), std::string::npos) << by_user.out;
  EXPECT_NE(by_user.err.find("uid 0's processes can be ended only by root"), std::string::npos) << by_user.err;
  EXPECT_TRUE(running(roots.pid));
  if (!cgroup.skip_reason().empty()) {
    RecordProperty("cgroup_half_not_run", cgroup.skip_reason());  // the --user half above ran
    return;
  }
  ASSERT_TRUE(cgroup.adopt(roots.pid));
  const auto by_cgroup = run_command({gpureap_binary(), "reap", "--cgroup", cgroup.path()}, options);
  EXPECT_EQ(by_cgroup.exit_code, 7) << by_cgroup.out << by_cgroup.err;
  EXPECT_NE(by_cgroup.err.find("PID " + std::to_string(roots.pid) + " in it belongs to another user"),
            std::string::npos)
      << by_cgroup.err;
  EXPECT_TRUE(running(roots.pid));
}

// Reading cgroup.procs takes no lock: another gpureap acting on the cgroup (holding the flock
// on its directory) does not make reap say it cannot read it.
TEST(Reap, ACgroupLockedByAnotherGpureapIsStillRead) {
  OwnCgroup cgroup("reap-locked");
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  ASSERT_TRUE(cgroup.adopt(job.pid));
  const int lock = ::open(cgroup.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);
  int rc = -1;
  std::string err;
  const auto report = reap_json(host, {"--cgroup", cgroup.path(), "--dry-run"}, &rc, &err);
  ::close(lock);
  EXPECT_EQ(rc, 0) << report.dump(2) << err;
  EXPECT_EQ(err.find("cannot read"), std::string::npos) << err;
  EXPECT_NE(report.dump().find(std::to_string(job.pid)), std::string::npos) << report.dump(2);
  EXPECT_TRUE(running(job.pid));
}

TEST(Reap, AnAbsoluteCgroupPathIsTakenAsAbsolute) {
  OwnCgroup cgroup("reap-absolute");
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  ASSERT_TRUE(cgroup.adopt(job.pid));
  int rc = -1;
  const auto report = reap_json(host, {"--cgroup", cgroup.path(), "--dry-run"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_EQ(report["criteria"]["cgroup"], cgroup.path());
  EXPECT_TRUE(running(job.pid));
  // A /sys/fs/cgroup path is never joined to the mount: on a unified host it is missing as
  // written; on a hybrid one (v2 at /sys/fs/cgroup/unified) it is not under the mount.
  const auto missing = host.gpureap({"reap", "--cgroup", "/sys/fs/cgroup/gpureap-no-such-job"});
  EXPECT_EQ(missing.exit_code, 2);
  const std::string mount = cgroupfs::cgroup2_mount("/proc").value_or("");
  EXPECT_NE(missing.err.find(mount == "/sys/fs/cgroup"
                                 ? "--cgroup /sys/fs/cgroup/gpureap-no-such-job: no such cgroup"
                                 : "--cgroup /sys/fs/cgroup/gpureap-no-such-job: not under the cgroup v2 hierarchy, "
                                   "which is mounted at " + mount),
            std::string::npos)
      << missing.err;
  EXPECT_EQ(missing.err.find("/sys/fs/cgroup/unified/sys/"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace gpureap::test
