// Leftover System V and /dev/shm objects of a dead process: found with sizes and creators,
// and removed by --fix. Each test runs in its own IPC namespace with a private /dev/shm, so
// no other test's (or the machine's) objects are seen or touched.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "doctor_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

struct IsolatedRun {
  CommandResult result;
  nlohmann::json before, after_fix, after;
  std::string leaver_line;
};

// In a new IPC + mount namespace: tmpfs on /dev/shm, ipc-leaver leaves objects and exits,
// then doctor --json, doctor --fix (with fix_args) --json, doctor --json again.
IsolatedRun run_isolated(const SimHost& host, const std::vector<std::string>& fix_args) {
  std::string fix;
  for (const auto& a : fix_args) fix += " " + a;
  const std::string script =
      "set -e; mount -t tmpfs -o size=64m gpureap-test /dev/shm; "
      "\"$1\" 1048576 gpureap-doctor-test 2097152 > \"$3/leaver\"; "
      "\"$2\" doctor --json --no-kernel-log > \"$3/before.json\" || true; "
      "\"$2\" doctor --json --no-kernel-log --fix --yes" + fix + " > \"$3/fix.json\" || true; "
      "\"$2\" doctor --json --no-kernel-log > \"$3/after.json\" || true";
  SpawnOptions options;
  options.env = host.env();
  IsolatedRun run;
  run.result = run_command({"/usr/bin/unshare", "--ipc", "--mount", "--propagation", "private", "/bin/sh", "-c", script,
                            "sh", IPC_LEAVER_BINARY, gpureap_binary(), host.state_dir()},
                           options, 60000);
  auto read = [&](const std::string& name) {
    std::ifstream in(host.state_dir() + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  run.leaver_line = read("leaver");
  try {
    run.before = nlohmann::json::parse(read("before.json"));
    run.after_fix = nlohmann::json::parse(read("fix.json"));
    run.after = nlohmann::json::parse(read("after.json"));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "doctor output unreadable: " << e.what() << "\n" << run.result.err;
  }
  return run;
}

int field(const std::string& line, const std::string& key) {
  const auto at = line.find(key + "=");
  return at == std::string::npos ? -1 : std::stoi(line.substr(at + key.size() + 1));
}

TEST(DoctorIpc, SegmentSemaphoresAndShmFileOfADeadProcessAreFoundThenRemoved) {
  if (!running_as_root()) GTEST_SKIP() << "needs root for a private IPC namespace and /dev/shm mount";
  SimHost host;
  const auto run = run_isolated(host, {"--only", "leftover-sysv-shm,leftover-sysv-sem,leftover-posix-shm"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  const int shmid = field(run.leaver_line, "shmid");
  const int semid = field(run.leaver_line, "semid");
  ASSERT_GE(shmid, 0) << run.leaver_line;

  const auto shm = findings(run.before, "leftover-sysv-shm");
  ASSERT_EQ(shm.size(), 1u) << run.before["findings"].dump(2);
  ASSERT_EQ(shm.front()["evidence"]["segments"].size(), 1u);
  const auto& segment = shm.front()["evidence"]["segments"][0];
  EXPECT_EQ(segment["shmid"], shmid);
  EXPECT_EQ(segment["size_bytes"], 1048576);
  EXPECT_GT(segment["creator_pid"].get<int>(), 0);
  EXPECT_TRUE(has_remedy(shm.front(), "ipcrm -m " + std::to_string(shmid)));

  const auto sem = findings(run.before, "leftover-sysv-sem");
  ASSERT_EQ(sem.size(), 1u) << run.before["findings"].dump(2);
  EXPECT_EQ(sem.front()["evidence"]["semaphore_sets"][0]["semid"], semid);

  const auto posix = findings(run.before, "leftover-posix-shm");
  ASSERT_EQ(posix.size(), 1u) << run.before["findings"].dump(2);
  const auto& file = posix.front()["evidence"]["files"][0];
  EXPECT_EQ(file["path"], "/dev/shm/gpureap-doctor-test");
  EXPECT_EQ(file["size_bytes"], 2097152);
  EXPECT_TRUE(has_remedy(posix.front(), "rm -- /dev/shm/gpureap-doctor-test"));

  ASSERT_EQ(run.after_fix["fixes"].size(), 3u) << run.after_fix.dump(2);
  for (const auto& f : run.after_fix["fixes"]) EXPECT_EQ(f["outcome"], "done") << f.dump();
  EXPECT_TRUE(findings(run.after, "leftover-sysv-shm").empty()) << run.after.dump(2);
  EXPECT_TRUE(findings(run.after, "leftover-sysv-sem").empty());
  EXPECT_TRUE(findings(run.after, "leftover-posix-shm").empty());
}

TEST(DoctorIpc, PlainFixLeavesIpcAloneOnlyWhenNotChosen) {
  if (!running_as_root()) GTEST_SKIP() << "needs root for a private IPC namespace and /dev/shm mount";
  SimHost host;
  // --only zombie: nothing of the IPC kind may be touched.
  const auto run = run_isolated(host, {"--only", "zombie"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  EXPECT_EQ(findings(run.after, "leftover-sysv-shm").size(), 1u) << run.after.dump(2);
  EXPECT_EQ(findings(run.after, "leftover-posix-shm").size(), 1u);
}

}  // namespace
}  // namespace gpureap::test
