// ProcessTable::scan on a fixture /proc tree (tests/fixtures/proc/tree1): a host training
// job with a DataLoader worker, a docker container whose processes hold GPU 1, a zombie,
// a kernel thread, a process with a hostile name, and entries that must be ignored.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <unistd.h>

#include "proc/process_table.hpp"

namespace gpureap {
namespace {

namespace fs = std::filesystem;

const std::string kTree = std::string(GPUREAP_FIXTURE_DIR) + "/proc/tree1";
constexpr double kBootTime = 1700000000;

ProcessTable scan_tree(const std::string& root = kTree) {
  ProcScanOptions options;
  options.proc_root = root;
  return ProcessTable::scan(options);
}

std::vector<pid_t> sorted_pids(const ProcessTable& table, bool holders_only) {
  std::vector<pid_t> pids;
  for (const auto& [pid, info] : table.processes()) {
    if (!holders_only || info.holds_any_device_file()) pids.push_back(pid);
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

using Pids = std::vector<pid_t>;

TEST(ProcTableFixture, ListsProcessesAndSkipsWhatIsNotOne) {
  const ProcessTable table = scan_tree();
  // 600 has a garbage stat, 700 none; "self", "stat" and "uptime" are not processes.
  EXPECT_EQ(sorted_pids(table, false), (Pids{1, 2, 100, 200, 201, 250, 300, 400, 401, 402, 500}));
  EXPECT_FALSE(table.in_child_pid_namespace());
  EXPECT_EQ(table.find(600), nullptr);
  EXPECT_EQ(table.options().proc_root, kTree);
}

TEST(ProcTableFixture, ChildrenAndAncestry) {
  const ProcessTable table = scan_tree();
  EXPECT_EQ(table.children_of(0), (Pids{1, 2}));
  EXPECT_EQ(table.children_of(1), (Pids{100, 250, 400, 500}));
  EXPECT_EQ(table.children_of(100), (Pids{200, 300}));
  EXPECT_EQ(table.children_of(200), (Pids{201}));
  EXPECT_EQ(table.children_of(201), Pids{});
  EXPECT_EQ(table.children_of(12345), Pids{});
  EXPECT_EQ(table.ancestry(201), (Pids{201, 200, 100, 1}));
  EXPECT_EQ(table.ancestry(402), (Pids{402, 401, 400, 1}));
  EXPECT_EQ(table.ancestry(1), (Pids{1}));
  EXPECT_EQ(table.ancestry(2), (Pids{2}));
  EXPECT_EQ(table.ancestry(99999), (Pids{99999}));
}

// The walk kill's target selection, plan check and detail loading share: every descendant once,
// each before its children, the highest PID among siblings first; the root itself left out.
TEST(ProcTableFixture, DescendantsDepthFirst) {
  const ProcessTable table = scan_tree();
  EXPECT_EQ(table.descendants_of(100), (Pids{300, 200, 201}));
  EXPECT_EQ(table.descendants_of(400), (Pids{401, 402}));
  EXPECT_EQ(table.descendants_of(1), (Pids{500, 400, 401, 402, 250, 100, 300, 200, 201}));
  EXPECT_EQ(table.descendants_of(201), Pids{});
  EXPECT_EQ(table.descendants_of(12345), Pids{});
}

TEST(ProcTableFixture, StatFieldsAndDerivedTimes) {
  const ProcessTable table = scan_tree();
  const ProcessInfo* p = table.find(200);
  ASSERT_NE(p, nullptr);
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  EXPECT_EQ(p->comm, "python3");
  EXPECT_EQ(p->state, 'S');
  EXPECT_EQ(p->ppid, 100);
  EXPECT_EQ(p->start_time_ticks, 30000u);
  EXPECT_DOUBLE_EQ(p->start_time_unix, kBootTime + 30000 / hz);
  EXPECT_DOUBLE_EQ(p->cpu_seconds, 100000 / hz);
  EXPECT_GT(p->elapsed_seconds, 0);
  EXPECT_NEAR(p->cpu_percent, p->cpu_seconds / p->elapsed_seconds * 100, 1e-9);
  EXPECT_EQ(p->rss_bytes, 524288u * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_FALSE(p->kernel_thread);

  const ProcessInfo* kthreadd = table.find(2);
  ASSERT_NE(kthreadd, nullptr);
  EXPECT_TRUE(kthreadd->kernel_thread);
  EXPECT_EQ(kthreadd->command(), "[kthreadd]");

  const ProcessInfo* hostile = table.find(500);
  ASSERT_NE(hostile, nullptr);
  EXPECT_EQ(hostile->comm, "(my) (proc) name)");
  EXPECT_EQ(hostile->ppid, 1);
}

TEST(ProcTableFixture, FindsEveryHolderWithItsDeviceFiles) {
  const ProcessTable table = scan_tree();
  EXPECT_EQ(sorted_pids(table, true), (Pids{200, 201, 250, 401, 402}));

  const ProcessInfo* trainer = table.find(200);
  ASSERT_EQ(trainer->device_files.size(), 4u);  // not the socket, eventfd, pipe or data file
  EXPECT_EQ(trainer->device_files[0].fd, 3);
  EXPECT_EQ(trainer->device_files[0].kind, DeviceFileKind::Control);
  EXPECT_EQ(trainer->device_files[1].fd, 4);
  EXPECT_EQ(trainer->device_files[1].kind, DeviceFileKind::Gpu);
  EXPECT_EQ(trainer->device_files[1].path, "/dev/nvidia0");
  EXPECT_EQ(trainer->device_files[2].kind, DeviceFileKind::Uvm);
  EXPECT_EQ(trainer->device_files[3].fd, 10);
  EXPECT_EQ(trainer->device_files[3].kind, DeviceFileKind::UvmTools);
  EXPECT_TRUE(trainer->holds_gpu_minor(0));
  EXPECT_FALSE(trainer->holds_gpu_minor(1));

  // The DataLoader worker inherited the descriptors: it holds GPU 0 too.
  EXPECT_TRUE(table.find(201)->holds_gpu_minor(0));
  EXPECT_TRUE(table.find(250)->holds_gpu_minor(2));  // node deleted, descriptor still open

  const ProcessInfo* server = table.find(401);
  ASSERT_EQ(server->device_files.size(), 5u);
  EXPECT_TRUE(server->holds_gpu_minor(1));
  EXPECT_EQ(server->device_files[3].kind, DeviceFileKind::Caps);
  EXPECT_EQ(server->device_files[3].minor, 21);
  EXPECT_EQ(server->device_files[4].kind, DeviceFileKind::Modeset);

  for (const pid_t pid : {1, 2, 100, 300, 400, 500}) {
    EXPECT_FALSE(table.find(pid)->holds_any_device_file()) << pid;
    EXPECT_EQ(table.find(pid)->fd_access, FdAccess::Ok) << pid;
  }
}

TEST(ProcTableFixture, DetailsAreLoadedForHoldersOnly) {
  const ProcessTable table = scan_tree();
  for (const auto& [pid, info] : table.processes()) {
    EXPECT_EQ(info.details_loaded, info.holds_any_device_file()) << pid;
  }
  const ProcessInfo* trainer = table.find(200);
  EXPECT_EQ(trainer->cmdline, (std::vector<std::string>{"python3", "train.py", "--epochs", "90"}));
  EXPECT_EQ(trainer->command(), "python3 train.py --epochs 90");
  EXPECT_EQ(trainer->uid, 1000u);
  EXPECT_FALSE(trainer->user.empty());
  EXPECT_EQ(trainer->ns_pids, (Pids{200}));
  EXPECT_FALSE(trainer->container);
  EXPECT_EQ(trainer->exe, "");  // fixtures have no exe link
  EXPECT_EQ(trainer->wchan, "");

  const ProcessInfo* server = table.find(401);
  EXPECT_EQ(server->ns_pids, (Pids{401, 1}));
  EXPECT_EQ(server->user, "root");
  ASSERT_TRUE(server->container);
  EXPECT_EQ(server->container->runtime, "docker");
  std::string docker_id;
  for (int i = 0; i < 32; ++i) docker_id += "ab";
  EXPECT_EQ(server->container->id, docker_id);

  const ProcessInfo* stuck = table.find(402);
  EXPECT_EQ(stuck->state, 'D');
  EXPECT_EQ(stuck->wchan, "uvm_va_space_destroy");
  EXPECT_EQ(stuck->ns_pids, (Pids{402, 7, 1}));
  EXPECT_EQ(stuck->ns_pids.back(), 1);

  const ProcessInfo* bash = table.find(100);
  EXPECT_TRUE(bash->cmdline.empty());
  EXPECT_EQ(bash->command(), "[bash]");
}

TEST(ProcTableFixture, LoadDetailsOnRequestSkipsUnknownPids) {
  ProcessTable table = scan_tree();
  const pid_t asked[] = {100, 300, 2, 99999};
  table.load_details(asked);
  const ProcessInfo* bash = table.find(100);
  EXPECT_TRUE(bash->details_loaded);
  EXPECT_EQ(bash->cmdline, (std::vector<std::string>{"-bash"}));
  EXPECT_EQ(bash->uid, 1000u);
  const ProcessInfo* zombie = table.find(300);
  EXPECT_EQ(zombie->state, 'Z');
  EXPECT_TRUE(zombie->cmdline.empty());
  EXPECT_EQ(zombie->command(), "[defunct]");
  EXPECT_EQ(table.find(99999), nullptr);
}

class ProcTableCopiedTree : public testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpureap-proc-tree-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
    fs::copy(kTree, root_, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  void write(const std::string& relative, const std::string& text) {
    std::ofstream(root_ + "/" + relative, std::ios::trunc) << text;
  }
  std::string root_;
};

// Between scan and load_details the PID may have been reused by another process: its start
// time differs, and nothing of the newcomer may be attributed to the process we scanned.
TEST_F(ProcTableCopiedTree, LoadDetailsRefusesAReusedPid) {
  ProcessTable table = scan_tree(root_);
  write("100/stat",
        "100 (intruder) S 1 100 100 0 -1 4194560 0 0 0 0 1 1 0 0 20 0 1 0 99999 0 10 0\n");
  write("100/cmdline", std::string("intruder\0", 9));
  const pid_t asked[] = {100};
  table.load_details(asked);
  const ProcessInfo* info = table.find(100);
  EXPECT_FALSE(info->details_loaded);
  EXPECT_TRUE(info->cmdline.empty());
  EXPECT_EQ(info->comm, "bash");
}

TEST_F(ProcTableCopiedTree, VanishedProcessIsSkipped) {
  ProcessTable table = scan_tree(root_);
  fs::remove_all(root_ + "/100");
  const pid_t asked[] = {100};
  table.load_details(asked);
  EXPECT_FALSE(table.find(100)->details_loaded);
}

TEST_F(ProcTableCopiedTree, BootTimeFallsBackToTheClockWithoutProcStat) {
  fs::remove(root_ + "/stat");
  const ProcessTable table = scan_tree(root_);
  const ProcessInfo* p = table.find(200);
  ASSERT_NE(p, nullptr);
  EXPECT_GT(p->start_time_unix, kBootTime);  // this machine booted after the fixture's btime
}

// Stat files read at different moments can show a ppid cycle (a parent's PID taken meanwhile by
// a child of its child): the walk lists each process once and ends.
TEST_F(ProcTableCopiedTree, DescendantsEndAtAPpidCycle) {
  for (const auto& [pid, ppid] : {std::pair{9001, 9002}, std::pair{9002, 9001}, std::pair{9003, 9002}}) {
    fs::create_directories(root_ + "/" + std::to_string(pid) + "/fd");
    write(std::to_string(pid) + "/stat", std::to_string(pid) + " (c) S " + std::to_string(ppid) +
                                             " 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 100 0 10 0\n");
  }
  const ProcessTable table = scan_tree(root_);
  EXPECT_EQ(table.descendants_of(9001), (Pids{9002, 9003}));
  EXPECT_EQ(table.descendants_of(9002), (Pids{9003, 9001}));
}

// Enough processes for the scan to split the work between threads: every one is found once,
// with its own parent and its own descriptors.
TEST_F(ProcTableCopiedTree, ManyProcessesAllFoundOnce) {
  constexpr pid_t kFirst = 10000;
  constexpr int kCount = 1000;
  for (pid_t pid = kFirst; pid < kFirst + kCount; ++pid) {
    const std::string dir = root_ + "/" + std::to_string(pid);
    fs::create_directories(dir + "/fd");
    write(std::to_string(pid) + "/stat",
          std::to_string(pid) + " (w" + std::to_string(pid) + ") S " + std::to_string(pid - 1) +
              " 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 100 0 10 0\n");
    fs::create_symlink(pid % 3 == 0 ? "/dev/nvidia" + std::to_string(pid % 8) : "/dev/null",
                       dir + "/fd/3");
  }
  const ProcessTable table = scan_tree(root_);
  EXPECT_EQ(table.processes().size(), 11u + kCount);
  int holders = 0;
  for (pid_t pid = kFirst; pid < kFirst + kCount; ++pid) {
    const ProcessInfo* info = table.find(pid);
    ASSERT_NE(info, nullptr) << pid;
    EXPECT_EQ(info->comm, "w" + std::to_string(pid));
    EXPECT_EQ(info->ppid, pid - 1);
    if (pid > kFirst) {
      EXPECT_EQ(table.children_of(pid - 1), std::vector<pid_t>{pid});
    }
    if (pid % 3 == 0) {
      ++holders;
      EXPECT_TRUE(info->holds_gpu_minor(pid % 8)) << pid;
      EXPECT_TRUE(info->details_loaded) << pid;  // no status file: uid from the directory
    } else {
      EXPECT_FALSE(info->holds_any_device_file()) << pid;
    }
  }
  EXPECT_EQ(holders, kCount / 3);
  // Down to the first parent not in the table, which is included.
  EXPECT_EQ(table.ancestry(kFirst + 10).size(), 12u);
  EXPECT_EQ(table.ancestry(kFirst + 10).back(), kFirst - 1);
}

TEST(ProcTableFixture, MissingRootThrowsWithThePath) {
  try {
    scan_tree("/nonexistent/proc");
    FAIL() << "expected an exception";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/proc"), std::string::npos);
  }
}

TEST(ProcTableFixture, DevDirSelectsWhichFilesCount) {
  ProcScanOptions options;
  options.proc_root = kTree;
  options.dev_dir = "/tmp";  // 500 holds /tmp/dev/nvidia0, which is not directly in /tmp
  const ProcessTable table = ProcessTable::scan(options);
  EXPECT_EQ(sorted_pids(table, true), Pids{});
  options.dev_dir = "/tmp/dev/";
  EXPECT_EQ(sorted_pids(ProcessTable::scan(options), true), (Pids{500}));
}

}  // namespace
}  // namespace gpureap
