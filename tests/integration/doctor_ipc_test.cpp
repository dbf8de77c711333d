// Leftover System V and /dev/shm objects of a dead process: found with sizes and creators,
// and removed by --fix. Each test runs in its own IPC namespace with a private /dev/shm, so
// no other test's (or the machine's) objects are seen or touched.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

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

// Nothing is removed while any process is in D (its maps cannot be read safely); other tests
// freeze processes into D with the cgroup v1 freezer. Non-empty: why this run proves nothing.
std::string blocked_by_d(const nlohmann::json& fixes) {
  for (const auto& f : fixes) {
    if (f["message"].is_string() &&
        f["message"].get<std::string>().find("uninterruptible sleep (D)") != std::string::npos) {
      return "a process is in D (another test may have frozen one), so nothing was removed: " +
             f["message"].get<std::string>();
    }
  }
  return {};
}

nlohmann::json fixes_in(const nlohmann::json& report) {
  return report.is_object() && report.contains("fixes") ? report["fixes"] : nlohmann::json::array();
}

// Most D states pass in moments (a process in the middle of disk I/O, a daemon another test is
// ending): a run blocked by one is taken again, for up to 5 s, before the test gives up.
template <typename Attempt, typename FixesOf>
auto retried_while_a_process_is_in_d(Attempt attempt, FixesOf fixes_of) {
  auto result = attempt();
  for (int retry = 0; retry < 10 && !blocked_by_d(fixes_of(result)).empty(); ++retry) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    result = attempt();
  }
  return result;
}

int field(const std::string& line, const std::string& key) {
  const auto at = line.find(key + "=");
  return at == std::string::npos ? -1 : std::stoi(line.substr(at + key.size() + 1));
}

TEST(DoctorIpc, SegmentSemaphoresAndShmFileOfADeadProcessAreFoundThenRemoved) {
  if (!running_as_root()) GTEST_SKIP() << "needs root for a private IPC namespace and /dev/shm mount";
  SimHost host;
  const auto run = retried_while_a_process_is_in_d(
      [&] { return run_isolated(host, {"--only", "leftover-sysv-shm,leftover-sysv-sem,leftover-posix-shm"}); },
      [](const IsolatedRun& r) { return fixes_in(r.after_fix); });
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

  if (const std::string why = blocked_by_d(run.after_fix["fixes"]); !why.empty()) GTEST_SKIP() << why;
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

// The data-loss case: a plain --fix --yes in a private /dev/shm holding a dataset shard written
// just now, an old file nobody can tie to a job, a dead PyTorch job's file written just now, and
// a dead PyTorch job's old file. Only the last is removed, and its removal is in the audit log.
TEST(DoctorIpc, PlainFixRemovesOnlyADeadPyTorchJobsOldFileAndAuditsIt) {
  if (!running_as_root()) GTEST_SKIP() << "needs root for a private /dev/shm mount";
  SimHost host;
  const std::string audit = host.state_dir() + "/audit.log";
  const std::string setup =
      "dead=$(sh -c 'echo $$'); "
      "head -c 65536 /dev/zero > /dev/shm/dataset-shard-0 && "
      "head -c 65536 /dev/zero > /dev/shm/old-unknown && touch -d '2 hours ago' /dev/shm/old-unknown && "
      "head -c 65536 /dev/zero > /dev/shm/torch_${dead}_4242_0 && touch -d '2 hours ago' /dev/shm/torch_${dead}_4242_0 && "
      "head -c 65536 /dev/zero > /dev/shm/torch_${dead}_77_1";
  int rc = -1;
  const auto report = retried_while_a_process_is_in_d(
      [&] {
        std::remove(audit.c_str());  // only the attempt that counts is audited
        return doctor_json(host, {"--fix", "--yes", "--audit-log", audit}, &rc, {}, setup);
      },
      [](const nlohmann::json& r) { return fixes_in(r); });
  ASSERT_TRUE(report.contains("fixes")) << report.dump(2);
  if (const std::string why = blocked_by_d(report["fixes"]); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::string> removed;
  for (const auto& f : report["fixes"]) {
    if (f["finding_id"] == "leftover-posix-shm" && f["outcome"] == "done") removed.push_back(f["action"]);
  }
  ASSERT_EQ(removed.size(), 1u) << report["fixes"].dump(2);
  EXPECT_NE(removed[0].find("_4242_0"), std::string::npos) << removed[0];

  // What remains, in the diagnosis after the fixes: everything else, each saying why it stayed.
  const auto left = findings(report, "leftover-posix-shm");
  ASSERT_EQ(left.size(), 1u) << report["findings"].dump(2);
  std::vector<std::string> paths;
  for (const auto& file : left[0]["evidence"]["files"]) {
    paths.push_back(file["path"]);
    EXPECT_FALSE(file["removed_by_fix"].get<bool>()) << file.dump();
    EXPECT_EQ(file["size_bytes"], 65536);
  }
  std::sort(paths.begin(), paths.end());
  ASSERT_EQ(paths.size(), 3u) << left[0].dump(2);
  EXPECT_EQ(paths[0], "/dev/shm/dataset-shard-0");
  EXPECT_EQ(paths[1], "/dev/shm/old-unknown");
  EXPECT_NE(paths[2].find("_77_1"), std::string::npos) << "a dead job's file written just now stays";
  std::string details;
  for (const auto& d : left[0]["details"]) details += d.get<std::string>() + "\n";
  EXPECT_NE(details.find("not recognisably a GPU job's"), std::string::npos) << details;

  // Audited like a signal: a line before and a line after, for that file only.
  std::ifstream in(audit);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["stage"], "removing");
  EXPECT_EQ(lines[1]["stage"], "removed");
  for (const auto& l : lines) {
    EXPECT_NE(l["object"].get<std::string>().find("/dev/shm/torch_"), std::string::npos) << l.dump();
    EXPECT_NE(l["object"].get<std::string>().find("_4242_0"), std::string::npos) << l.dump();
  }
  EXPECT_EQ(lines[1]["result"].get<std::string>().rfind("removed", 0), 0u) << lines[1].dump();
}

// System V objects carry no name that ties them to a GPU job: a plain --fix leaves them.
TEST(DoctorIpc, PlainFixLeavesSystemVObjectsAlone) {
  if (!running_as_root()) GTEST_SKIP() << "needs root for a private IPC namespace and /dev/shm mount";
  SimHost host;
  const auto run = run_isolated(host, {});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  EXPECT_EQ(findings(run.after, "leftover-sysv-shm").size(), 1u) << run.after.dump(2);
  EXPECT_EQ(findings(run.after, "leftover-sysv-sem").size(), 1u) << run.after.dump(2);
  EXPECT_EQ(findings(run.after, "leftover-posix-shm").size(), 1u) << "a file of unknown origin stays";
  EXPECT_TRUE(run.after_fix["fixes"].empty() || run.after_fix["fixes"][0]["finding_id"].is_null())
      << run.after_fix["fixes"].dump(2);
}

}  // namespace
}  // namespace gpureap::test
