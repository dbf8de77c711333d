// `gpureap ps` against real processes on simulated GPUs: the right PIDs, memory, users,
// states, holders, and unattributed memory.
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(Ps, ListsEachProcessWithItsMemoryAndLinuxFacts) {
  SimHost host({"--gpus", "2", "--memory", "80GiB"});
  auto a = host.start({"--alloc", "0:2GiB"});
  auto b = host.start({"--alloc", "1:1536MiB"});
  int rc = -1;
  const auto ps = host.ps_json({}, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ps["schema"], "gpureap.ps/1");
  ASSERT_EQ(ps["gpus"].size(), 2u);

  const auto* pa = find_process(ps, a.pid, 0);
  ASSERT_NE(pa, nullptr) << ps.dump(2);
  EXPECT_EQ((*pa)["gpu_memory_bytes"], 2 * GiB);
  EXPECT_EQ((*pa)["type"], "C");
  EXPECT_EQ((*pa)["identity"], "ok");
  EXPECT_EQ((*pa)["user"], getpwuid(geteuid())->pw_name);
  EXPECT_EQ((*pa)["state"], "S");
  EXPECT_EQ((*pa)["ppid"], getpid());
  EXPECT_EQ((*pa)["pgid"], a.launcher_pid);
  EXPECT_EQ((*pa)["namespace_pid"], a.pid);
  EXPECT_TRUE((*pa)["container"].is_null());
  EXPECT_NE((*pa)["command"].get<std::string>().find("gpusim-cuda"), std::string::npos);

  const auto* pb = find_process(ps, b.pid, 1);
  ASSERT_NE(pb, nullptr);
  EXPECT_EQ((*pb)["gpu_memory_bytes"], 1536 * MiB);
  EXPECT_EQ(find_process(ps, b.pid, 0), nullptr);

  const auto& gpu0 = gpu_entry(ps, 0);
  EXPECT_EQ(gpu0["memory"]["total_bytes"], 80 * GiB);
  EXPECT_EQ(gpu0["memory"]["used_bytes"], 2 * GiB);
  EXPECT_EQ(gpu0["memory"]["unattributed_bytes"], 0);
  EXPECT_TRUE(gpu0["uuid"].get<std::string>().rfind("GPU-", 0) == 0);
  EXPECT_NE(gpu0["uuid"], gpu_entry(ps, 1)["uuid"]);

  // Listed processes are holders too, and say so.
  const auto* holder = find_holder(ps, a.pid);
  ASSERT_NE(holder, nullptr);
  EXPECT_TRUE((*holder)["listed_by_driver"].get<bool>());
  EXPECT_EQ((*holder)["gpus"], nlohmann::json::array({0}));
}

TEST(Ps, StoppedProcessShowsStateT) {
  SimHost host;
  auto a = host.start({"--alloc", "0:1GiB"});
  ASSERT_EQ(kill(a.pid, SIGSTOP), 0);
  ASSERT_TRUE(eventually([&] {
    const auto ps = host.ps_json();
    const auto* p = find_process(ps, a.pid);
    return p != nullptr && (*p)["state"] == "T";
  }));
  kill(a.pid, SIGCONT);
}

TEST(Ps, ProcessOfANonRootUserShowsThatUser) {
  if (!running_as_root()) GTEST_SKIP() << "creating a user and switching to it needs root";
  const char* name = kTestUserName;
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host;
  auto mine = host.start({"--alloc", "0:1GiB"});
  auto theirs = host.start({"--alloc", "0:3GiB"}, pw->pw_uid);
  const auto ps = host.ps_json();
  const auto* p = find_process(ps, theirs.pid);
  ASSERT_NE(p, nullptr) << ps.dump(2);
  EXPECT_EQ((*p)["user"], name);
  EXPECT_EQ((*p)["uid"], pw->pw_uid);
  EXPECT_EQ((*p)["gpu_memory_bytes"], 3 * GiB);
  EXPECT_EQ((*p)["identity"], "ok");

  // --user filters by name and by uid.
  const auto only = host.ps_json({"--user", name});
  ASSERT_EQ(only["processes"].size(), 1u);
  EXPECT_EQ(only["processes"][0]["pid"], theirs.pid);
  const auto by_uid = host.ps_json({"--user", std::to_string(pw->pw_uid)});
  ASSERT_EQ(by_uid["processes"].size(), 1u);
}

TEST(Ps, UnprivilegedViewerSeesOtherUsersProcessesAsUnverified) {
  if (!running_as_root()) GTEST_SKIP() << "needs root to run gpureap as another user";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host;
  auto roots = host.start({"--alloc", "0:1GiB"});
  SpawnOptions options;
  options.env = host.env();
  options.uid = pw->pw_uid;
  const auto result = run_command({gpureap_binary(), "ps", "--json"}, options);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto ps = nlohmann::json::parse(result.out);
  const auto* p = find_process(ps, roots.pid);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->at("identity"), "unverified");
  EXPECT_NE(p->at("identity_reason").get<std::string>().find("run as root"), std::string::npos);
  EXPECT_EQ(p->at("user"), "root");
  EXPECT_GT(ps["host"]["processes_not_inspected"].get<int>(), 0) << "the blind spot is reported";
  EXPECT_EQ(find_holder(ps, roots.pid), nullptr) << "root's descriptors are not readable";
}

TEST(Ps, WorkersThatInheritDescriptorsAreHolders) {
  SimHost host;
  auto job = host.start({"--alloc", "0:4GiB", "--workers", "3"});
  ASSERT_EQ(job.workers.size(), 3u);
  const auto ps = host.ps_json();
  for (pid_t worker : job.workers) {
    const auto* h = find_holder(ps, worker);
    ASSERT_NE(h, nullptr) << "worker " << worker << " missing\n" << ps.dump(2);
    EXPECT_FALSE((*h)["listed_by_driver"].get<bool>());
    EXPECT_EQ((*h)["role"], "worker");
    EXPECT_EQ((*h)["listed_ancestor"], job.pid);
    EXPECT_EQ((*h)["gpus"], nlohmann::json::array({0}));
    EXPECT_EQ((*h)["ppid"], job.pid);
    ASSERT_FALSE((*h)["ancestry"].empty());
    EXPECT_EQ((*h)["ancestry"][0]["pid"], job.pid);
    EXPECT_EQ(find_process(ps, worker), nullptr) << "the driver lists only the owner";
  }
}

TEST(Ps, OwnerKilledWhileWorkersHoldDescriptorsIsListedAsExitedAndHeldByTheOrphans) {
  SimHost host;
  auto job = host.start({"--alloc", "0:4GiB", "--workers", "2"});
  ASSERT_EQ(kill(job.pid, SIGKILL), 0);
  job.wait_exit();
  const auto ps = host.ps_json();
  const auto& gpu = gpu_entry(ps, 0);
  EXPECT_EQ(gpu["memory"]["used_bytes"], 4 * GiB) << "inheritors keep the memory alive";
  // As a real driver does, the dead owner stays listed with the memory its workers keep.
  EXPECT_EQ(gpu["memory"]["unattributed_bytes"], 0);
  EXPECT_EQ(gpu["memory"]["held_for_exited_bytes"], 4 * GiB);
  const auto* owner = find_process(ps, job.pid);
  ASSERT_NE(owner, nullptr) << ps.dump(2);
  EXPECT_EQ((*owner)["identity"], "foreign") << "it does not exist: never signal it by number";
  std::vector<pid_t> workers = job.workers, held_by = (*owner)["held_by"].get<std::vector<pid_t>>();
  std::sort(workers.begin(), workers.end());
  std::sort(held_by.begin(), held_by.end());
  EXPECT_EQ(held_by, workers);
  EXPECT_NE((*owner)["identity_reason"].get<std::string>().find("exited"), std::string::npos);
  for (pid_t worker : job.workers) {
    const auto* h = find_holder(ps, worker);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ((*h)["role"], "orphan") << h->dump();
    EXPECT_EQ((*h)["context_of"], job.pid);
    EXPECT_FALSE((*h)["listed_by_driver"].get<bool>());
  }
  // The table says the listed PID has exited and who keeps its memory.
  const auto text = host.gpureap({"ps"});
  EXPECT_NE(text.out.find("exited; its context is kept alive by PID"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("ORPHAN: keeps " + std::to_string(job.pid) + "'s memory"), std::string::npos) << text.out;

  // Once the workers are gone the memory is released.
  for (pid_t worker : job.workers) kill(worker, SIGKILL);
  ASSERT_TRUE(eventually([&] { return host.ps_json()["gpus"][0]["memory"]["used_bytes"] == 0; }));
}

TEST(Ps, LeakedMemoryIsUnattributedWithNoHolder) {
  SimHost host;
  auto leaker = host.start({"--alloc", "1:768MiB", "--leak"});
  kill(leaker.pid, SIGKILL);
  leaker.wait_exit();
  nlohmann::json ps;
  ASSERT_TRUE(eventually([&] {
    ps = host.ps_json();
    return find_process(ps, leaker.pid) == nullptr;
  }));
  const auto& gpu = gpu_entry(ps, 1);
  EXPECT_EQ(gpu["memory"]["used_bytes"], 768 * MiB);
  EXPECT_EQ(gpu["memory"]["unattributed_bytes"], 768 * MiB);
  EXPECT_TRUE(ps["holders"].empty()) << ps["holders"].dump();
}

TEST(Ps, DelayedReleaseIsVisibleUntilTheDriverFrees) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--release-delay", "800"});
  kill(job.pid, SIGKILL);
  job.wait_exit();
  const auto first = host.ps_json();
  EXPECT_EQ(gpu_entry(first, 0)["memory"]["used_bytes"], 1 * GiB) << "release is not instant";
  EXPECT_TRUE(eventually([&] { return gpu_entry(host.ps_json(), 0)["memory"]["used_bytes"] == 0; }, 5000));
}

TEST(Ps, ZombieChildAppearsInTheTreeAsHoldingNothing) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--zombie-child"});
  const auto tree = host.gpureap({"ps", "--tree"});
  EXPECT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_NE(tree.out.find("zombie (holds no memory)"), std::string::npos) << tree.out;
}

TEST(Ps, TreeShowsWorkersUnderTheirGpuProcess) {
  SimHost host;
  auto job = host.start({"--alloc", "0:2GiB", "--workers", "2"});
  const auto tree = host.gpureap({"ps", "--tree"});
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  const auto owner_at = tree.out.find(std::to_string(job.pid));
  ASSERT_NE(owner_at, std::string::npos) << tree.out;
  for (pid_t worker : job.workers) {
    const auto at = tree.out.find(std::to_string(worker));
    ASSERT_NE(at, std::string::npos) << tree.out;
    EXPECT_GT(at, owner_at);
  }
  EXPECT_NE(tree.out.find("worker: holds this GPU's descriptors"), std::string::npos) << tree.out;
  EXPECT_NE(tree.out.find("└─"), std::string::npos);
}

TEST(Ps, GraphicsAndComputeMergeIntoOneRow) {
  SimHost host;
  auto both = host.start({"--alloc", "0:1GiB:C", "--alloc", "0:256MiB:G"});
  const auto ps = host.ps_json();
  int rows = 0;
  for (const auto& p : ps["processes"]) rows += p["pid"] == both.pid;
  EXPECT_EQ(rows, 1);
  const auto* p = find_process(ps, both.pid);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ((*p)["type"], "C+G");
  EXPECT_EQ((*p)["gpu_memory_bytes"], 1280 * MiB);
  EXPECT_EQ(gpu_entry(ps, 0)["memory"]["unattributed_bytes"], 0) << "not counted twice, not missed";
}

TEST(Ps, FiltersSelectGpusAndPids) {
  SimHost host;
  auto a = host.start({"--alloc", "0:1GiB"});
  auto b = host.start({"--alloc", "1:1GiB"});
  const auto gpu1 = host.ps_json({"--gpu", "1"});
  ASSERT_EQ(gpu1["gpus"].size(), 1u);
  EXPECT_EQ(gpu1["gpus"][0]["index"], 1);
  ASSERT_EQ(gpu1["processes"].size(), 1u);
  EXPECT_EQ(gpu1["processes"][0]["pid"], b.pid);
  const auto by_pid = host.ps_json({"--pid", std::to_string(a.pid)});
  ASSERT_EQ(by_pid["processes"].size(), 1u);
  EXPECT_EQ(by_pid["processes"][0]["pid"], a.pid);

  const auto bad = host.gpureap({"ps", "--gpu", "7"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--gpu 7: no such GPU"), std::string::npos) << bad.err;
}

TEST(Ps, NvidiaMinorNumbersMapToTheRightGpu) {
  SimHost host({"--gpus", "2", "--minors", "3,1"});
  auto job = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  const auto ps = host.ps_json();
  EXPECT_EQ(gpu_entry(ps, 0)["minor_number"], 3);
  const auto* p = find_process(ps, job.pid);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ((*p)["identity"], "ok");
  const auto* worker = find_holder(ps, job.workers.at(0));
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ((*worker)["gpus"], nlohmann::json::array({0}));
}

TEST(Ps, ColourOnlyWhenAskedOrOnATerminal) {
  SimHost host;
  auto a = host.start({"--alloc", "0:1GiB"});
  const auto plain = host.gpureap({"ps"});
  EXPECT_EQ(plain.out.find("\x1b["), std::string::npos) << "a pipe is not a terminal";
  const auto forced = host.gpureap({"ps", "--color", "always"});
  EXPECT_NE(forced.out.find("\x1b["), std::string::npos);
}

}  // namespace
}  // namespace gpureap::test

namespace gpureap::test {
namespace {

// --watch keeps refreshing (one JSON object per line) until interrupted, then exits 0.
TEST(PsWatch, EmitsOneObjectPerRefreshUntilInterrupted) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  int out_pipe[2];
  ASSERT_EQ(pipe2(out_pipe, O_CLOEXEC), 0);
  const pid_t child = fork();
  if (child == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    for (const auto& [k, v] : host.env()) setenv(k.c_str(), v.c_str(), 1);
    const std::string binary = gpureap_binary();
    execl(binary.c_str(), binary.c_str(), "ps", "--json", "--watch", "0.2", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out_pipe[1]);
  std::string out;
  ASSERT_TRUE(eventually([&] {
    char buffer[65536];
    pollfd fd{out_pipe[0], POLLIN, 0};
    if (poll(&fd, 1, 10) > 0) {
      const ssize_t n = read(out_pipe[0], buffer, sizeof(buffer));
      if (n > 0) out.append(buffer, static_cast<std::size_t>(n));
    }
    return std::count(out.begin(), out.end(), '\n') >= 3;
  }, 10000)) << out;
  kill(child, SIGINT);
  int status = 0;
  ASSERT_TRUE(eventually([&] { return waitpid(child, &status, WNOHANG) == child; }, 5000));
  close(out_pipe[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    const auto end = out.find('\n', start);
    const auto frame = nlohmann::json::parse(out.substr(start, end - start));
    EXPECT_EQ(frame["schema"], "gpureap.ps/1");
    EXPECT_NE(find_process(frame, job.pid), nullptr);
    start = end + 1;
  }
}

}  // namespace
}  // namespace gpureap::test

namespace gpureap::test {
namespace {

TEST(PsDevDir, SymlinkedDevDirStillFindsHolders) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string link = host.state_dir() + "/devlink";
  ASSERT_EQ(symlink((host.state_dir() + "/dev").c_str(), link.c_str()), 0);
  const auto ps = nlohmann::json::parse(host.gpureap({"ps", "--json"}, {{"GPUREAP_DEV_DIR", link}}).out);
  EXPECT_NE(find_holder(ps, job.pid), nullptr) << ps.dump(2);
  const auto* p = find_process(ps, job.pid);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ((*p)["identity"], "ok");
}

}  // namespace
}  // namespace gpureap::test
