// ProcessTable::scan on the real /proc, against real child processes that hold files named
// like GPU device nodes in a temporary "dev dir". Every child is killed and reaped.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/device_fd_probe.hpp"
#include "proc/process_table.hpp"

namespace gpureap {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A temporary directory standing in for /dev, with empty files nvidia0 and nvidiactl.
class FakeDevDir {
 public:
  FakeDevDir() {
    char pattern[] = "/tmp/gpureap-dev-XXXXXX";
    if (mkdtemp(pattern) == nullptr) std::abort();
    path_ = fs::canonical(pattern).string();  // fd links show the resolved path
    std::ofstream(path_ + "/nvidia0").put('\0');
    std::ofstream(path_ + "/nvidiactl").put('\0');
  }
  ~FakeDevDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string file(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A forked child, SIGKILLed and reaped when the guard goes out of scope.
class Child {
 public:
  explicit Child(const std::function<void()>& body) {
    pid_ = fork();
    if (pid_ == 0) {
      body();
      _exit(0);
    }
  }
  ~Child() { kill_and_reap(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void kill_and_reap() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  int wait_exit_code() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
};

struct Pipe {
  Pipe() {
    if (pipe2(fds, O_CLOEXEC) != 0) std::abort();
  }
  ~Pipe() {
    close(fds[0]);
    close(fds[1]);
  }
  void send(pid_t value) const {
    if (write(fds[1], &value, sizeof value) != sizeof value) _exit(90);
  }
  pid_t receive() const {
    pid_t value = -1;
    if (read(fds[0], &value, sizeof value) != sizeof value) return -1;
    return value;
  }
  int fds[2];
};

// A grandchild (its parent, a Child, does not reap it): SIGKILLed when the test ends,
// however it ends; init reaps it once its parent is gone.
struct KillOnExit {
  pid_t pid;
  ~KillOnExit() {
    if (pid > 0) kill(pid, SIGKILL);
  }
};

// In a Child's body: forks a grandchild that waits in pause() until killed, first closing
// close_fd (so it does not hold what its parent holds); its PID.
pid_t fork_pausing(int close_fd = -1) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (close_fd >= 0) close(close_fd);
    pause();
    _exit(0);
  }
  return pid;
}

ProcessTable scan_live(const std::string& dev_dir, ProcScanScope scope = ProcScanScope::Everything) {
  ProcScanOptions options;
  options.dev_dir = dev_dir;
  options.scope = scope;
  return ProcessTable::scan(options);
}

// Scans until every pid shows state `state` (children take a moment to reach pause()), then
// once more: a scan reads every process's descriptors before their states, so the scan that
// first sees a child in pause() may hold descriptors it had not yet closed (seen under load).
ProcessTable scan_until_state(const std::string& dev_dir, std::initializer_list<pid_t> pids,
                              char state, ProcScanScope scope = ProcScanScope::Everything) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    ProcessTable table = scan_live(dev_dir, scope);
    const bool all = std::all_of(pids.begin(), pids.end(), [&](pid_t pid) {
      const ProcessInfo* info = table.find(pid);
      return info != nullptr && info->state == state;
    });
    if (all) return scan_live(dev_dir, scope);
    if (std::chrono::steady_clock::now() > deadline) return table;
    std::this_thread::sleep_for(5ms);
  }
}

std::vector<std::string> own_cmdline() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  return args;
}

void open_or_die(const std::string& path) {
  if (open(path.c_str(), O_RDONLY) < 0) _exit(91);  // deliberately kept open (no CLOEXEC needed)
}

TEST(ProcTableLive, FindsAChildHoldingDeviceFiles) {
  const FakeDevDir dev;
  const Pipe ready;
  Child child([&] {
    open_or_die(dev.file("nvidia0"));
    open_or_die(dev.file("nvidiactl"));
    ready.send(getpid());
    pause();
  });
  ASSERT_EQ(ready.receive(), child.pid());

  const ProcessTable table = scan_until_state(dev.path(), {child.pid()}, 'S');
  const ProcessInfo* info = table.find(child.pid());
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->state, 'S');
  EXPECT_EQ(info->ppid, getpid());
  EXPECT_EQ(info->fd_access, FdAccess::Ok);
  ASSERT_EQ(info->device_files.size(), 2u);
  EXPECT_EQ(info->device_files[0].kind, DeviceFileKind::Gpu);
  EXPECT_EQ(info->device_files[0].minor, 0);
  EXPECT_EQ(info->device_files[0].path, dev.file("nvidia0"));
  EXPECT_EQ(info->device_files[1].kind, DeviceFileKind::Control);
  EXPECT_EQ(info->device_files[1].path, dev.file("nvidiactl"));
  EXPECT_TRUE(info->holds_gpu_minor(0));
  EXPECT_GT(info->rss_bytes, 0u);
  EXPECT_GE(info->elapsed_seconds, 0);
  EXPECT_LT(info->elapsed_seconds, 60);
  EXPECT_NEAR(info->start_time_unix,
              std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(), 60);

  // Holders get their details without being asked.
  EXPECT_TRUE(info->details_loaded);
  EXPECT_EQ(info->cmdline, own_cmdline());
  EXPECT_EQ(info->exe, fs::read_symlink("/proc/self/exe").string());
  EXPECT_EQ(info->uid, geteuid());
  EXPECT_FALSE(info->user.empty());
  ASSERT_FALSE(info->ns_pids.empty());
  EXPECT_EQ(info->ns_pids.front(), child.pid());

  // The test process opened and closed the files: it holds nothing.
  const ProcessInfo* self = table.find(getpid());
  ASSERT_NE(self, nullptr);
  EXPECT_FALSE(self->holds_any_device_file());
  EXPECT_FALSE(self->details_loaded);
  EXPECT_EQ(table.children_of(getpid()), std::vector<pid_t>{child.pid()});

  // The same dev dir spelled with a trailing slash finds the same files.
  const ProcessTable again = scan_live(dev.path() + "/");
  ASSERT_NE(again.find(child.pid()), nullptr);
  EXPECT_EQ(again.find(child.pid())->device_files.size(), 2u);
}

TEST(ProcTableLive, GrandchildInheritingTheDescriptorIsAHolderToo) {
  const FakeDevDir dev;
  const Pipe grandchild_pid;
  Child child([&] {
    open_or_die(dev.file("nvidia0"));
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      pause();
      _exit(0);
    }
    grandchild_pid.send(grandchild);
    int status = 0;
    waitpid(grandchild, &status, 0);  // the test kills the grandchild first
  });
  const pid_t grandchild = grandchild_pid.receive();
  ASSERT_GT(grandchild, 0);

  const ProcessTable table = scan_until_state(dev.path(), {child.pid(), grandchild}, 'S');
  const ProcessInfo* parent_info = table.find(child.pid());
  const ProcessInfo* worker = table.find(grandchild);
  ASSERT_NE(parent_info, nullptr);
  ASSERT_NE(worker, nullptr);
  EXPECT_TRUE(parent_info->holds_gpu_minor(0));
  EXPECT_TRUE(worker->holds_gpu_minor(0));
  EXPECT_EQ(worker->ppid, child.pid());
  EXPECT_TRUE(worker->details_loaded);
  EXPECT_EQ(table.children_of(child.pid()), std::vector<pid_t>{grandchild});
  const std::vector<pid_t> chain = table.ancestry(grandchild);
  ASSERT_GE(chain.size(), 3u);
  EXPECT_EQ(chain[0], grandchild);
  EXPECT_EQ(chain[1], child.pid());
  EXPECT_EQ(chain[2], getpid());

  kill(grandchild, SIGKILL);
  EXPECT_EQ(child.wait_exit_code(), 0);
}

TEST(ProcTableLive, ZombieChildHoldsNothing) {
  const FakeDevDir dev;
  Child child([&] {
    open_or_die(dev.file("nvidia0"));
    _exit(0);  // the descriptor closes at exit
  });
  siginfo_t exited{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child.pid()), &exited, WEXITED | WNOWAIT), 0);

  ProcessTable table = scan_live(dev.path());
  const ProcessInfo* zombie = table.find(child.pid());
  ASSERT_NE(zombie, nullptr);
  EXPECT_EQ(zombie->state, 'Z');
  EXPECT_FALSE(zombie->holds_any_device_file());
  EXPECT_EQ(zombie->ppid, getpid());
  const pid_t asked[] = {child.pid()};
  table.load_details(asked);
  zombie = table.find(child.pid());
  EXPECT_TRUE(zombie->details_loaded);
  EXPECT_TRUE(zombie->cmdline.empty());
  EXPECT_EQ(zombie->command(), "[" + zombie->comm + "]");
}

// An empty fd/ is told apart by the process's cwd: a live process that closed every descriptor
// (like a kernel thread) holds nothing and is read no further; a zombie has no cwd either, and
// its stat is read, for the threads that may outlive its main one.
TEST(ProcTableLive, AnEmptyDescriptorTableIsLookedIntoOnlyWhenItsProcessHasExited) {
  const FakeDevDir dev;
  Child closed_all([] {
    ::close_range(0, ~0U, 0);
    for (;;) pause();
  });
  Child zombie([] { _exit(0); });
  siginfo_t exited{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(zombie.pid()), &exited, WEXITED | WNOWAIT), 0);
  const std::string closed_fds = "/proc/" + std::to_string(closed_all.pid()) + "/fd";
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!fs::is_empty(closed_fds) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(2ms);
  ASSERT_TRUE(fs::is_empty(closed_fds)) << "the child did not close its descriptors";

  const procfs::unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(proc);
  procfs::DeviceFdProbe probe(dev.path(), /*is_procfs=*/true);
  std::vector<DeviceFileHandle> held;
  EXPECT_EQ(probe.probe(proc.get(), closed_all.pid(), held), procfs::FdProbe::EmptyAlive);
  EXPECT_EQ(probe.probe(proc.get(), zombie.pid(), held), procfs::FdProbe::NoFiles);
  if (geteuid() == 0) EXPECT_EQ(probe.probe(proc.get(), 2, held), procfs::FdProbe::EmptyAlive) << "kthreadd";

  const ProcessTable table = scan_live(dev.path(), ProcScanScope::Holders);
  const ProcessInfo* seen = table.find(zombie.pid());
  ASSERT_NE(seen, nullptr) << "a zombie is read";
  EXPECT_EQ(seen->state, 'Z');
  EXPECT_EQ(table.find(closed_all.pid()), nullptr) << "a live process without descriptors is read no further";
}

// When only the main thread exits (pthread_exit in main), the process shows as a zombie
// but its other threads still hold the file table, and with it the GPU.
TEST(ProcTableLive, ZombieLeaderWithLiveThreadsStillHolds) {
  const FakeDevDir dev;
  const Pipe ready;
  Child child([&] {
    open_or_die(dev.file("nvidia0"));
    pthread_t thread;
    if (pthread_create(&thread, nullptr, [](void*) -> void* { for (;;) pause(); }, nullptr) != 0) {
      _exit(92);
    }
    ready.send(getpid());
    syscall(SYS_exit, 0);  // ends this thread only, without unwinding through gtest
  });
  ASSERT_EQ(ready.receive(), child.pid());
  for (const ProcScanScope scope : {ProcScanScope::Everything, ProcScanScope::Holders}) {
    const ProcessTable table = scan_until_state(dev.path(), {child.pid()}, 'Z', scope);
    const ProcessInfo* info = table.find(child.pid());
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->state, 'Z');
    EXPECT_TRUE(info->holds_gpu_minor(0));
  }
}

// Without descendants (ps without --tree) a holder's child that holds nothing is not read;
// the holder is, with its details and its ancestors.
TEST(ProcTableLive, HoldersScopeWithoutDescendantsLeavesOutAHoldersChild) {
  const FakeDevDir dev;
  const Pipe worker_pid;
  Child holder([&] {
    const int fd = open(dev.file("nvidia0").c_str(), O_RDONLY);
    if (fd < 0) _exit(91);
    worker_pid.send(fork_pausing(fd));
    pause();
  });
  const pid_t worker = worker_pid.receive();
  const KillOnExit end_worker{worker};
  ASSERT_GT(worker, 0);
  ASSERT_TRUE(scan_until_state(dev.path(), {holder.pid(), worker}, 'S').find(worker) != nullptr);

  ProcScanOptions options;
  options.dev_dir = dev.path();
  options.scope = ProcScanScope::Holders;
  options.descendants = false;
  ProcessTable table = ProcessTable::scan(options);
  const ProcessInfo* info = table.find(holder.pid());
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->holds_gpu_minor(0));
  EXPECT_TRUE(info->details_loaded);
  EXPECT_NE(table.find(getpid()), nullptr) << "its parent, for the ancestry";
  EXPECT_EQ(table.find(worker), nullptr);
  const pid_t roots[] = {holder.pid()};
  table.load_trees(roots);
  EXPECT_EQ(table.find(worker), nullptr) << "load_trees reads the roots alone too";
}

// ps's first look at each process lists a holder's descriptors to the end and hands them to
// the reader (for a process older than the scan), which does not list them again: the
// table must show every device file, in descriptor order, as a full scan does.
TEST(ProcTableLive, HoldersScopeHasEveryDeviceFileOfAnOlderHolder) {
  const FakeDevDir dev;
  const Pipe ready;
  Child child([&] {
    open_or_die(dev.file("nvidiactl"));
    open_or_die("/dev/null");  // not a device file, between two that are
    open_or_die(dev.file("nvidia0"));
    ready.send(getpid());
    pause();
  });
  ASSERT_EQ(ready.receive(), child.pid());
  std::this_thread::sleep_for(100ms);  // older than the scan by more than a clock tick or two

  const ProcessTable everything = scan_until_state(dev.path(), {child.pid()}, 'S');
  const ProcessTable holders = scan_until_state(dev.path(), {child.pid()}, 'S', ProcScanScope::Holders);
  const ProcessInfo* full = everything.find(child.pid());
  const ProcessInfo* seen = holders.find(child.pid());
  ASSERT_NE(full, nullptr);
  ASSERT_NE(seen, nullptr);
  ASSERT_EQ(seen->device_files.size(), 2u);
  EXPECT_EQ(seen->device_files[0].kind, DeviceFileKind::Control);
  EXPECT_EQ(seen->device_files[1].kind, DeviceFileKind::Gpu);
  EXPECT_EQ(seen->device_files[1].path, dev.file("nvidia0"));
  ASSERT_EQ(full->device_files.size(), seen->device_files.size());
  for (std::size_t i = 0; i < full->device_files.size(); ++i) {
    EXPECT_EQ(seen->device_files[i].fd, full->device_files[i].fd);
    EXPECT_EQ(seen->device_files[i].path, full->device_files[i].path);
  }
  EXPECT_LT(seen->device_files[0].fd, seen->device_files[1].fd);
  EXPECT_TRUE(seen->details_loaded);
}

// ps reads in full only the holders and what is shown around them: their ancestors, their
// process-group leader and their descendants. A bystander costs one look at its fd/ and is
// left out; an Everything scan (kill, doctor) still has it.
TEST(ProcTableLive, HoldersScopeReadsHoldersWithTheirAncestorsGroupLeaderAndTree) {
  const FakeDevDir dev;
  const Pipe ready;
  Child leader([&] {  // a process-group leader that holds nothing
    setpgid(0, 0);
    ready.send(getpid());
    pause();
  });
  ASSERT_EQ(ready.receive(), leader.pid());
  Child bystander([&] {
    ready.send(getpid());
    pause();
  });
  ASSERT_EQ(ready.receive(), bystander.pid());
  const Pipe worker_pid;
  Child holder([&] {
    if (setpgid(0, leader.pid()) != 0) _exit(93);
    const int fd = open(dev.file("nvidia0").c_str(), O_RDONLY);
    if (fd < 0) _exit(91);
    worker_pid.send(fork_pausing(fd));  // a child of the holder that holds nothing itself
    pause();
  });
  const pid_t worker = worker_pid.receive();
  const KillOnExit end_worker{worker};
  ASSERT_GT(worker, 0);

  const ProcessTable table =
      scan_until_state(dev.path(), {holder.pid(), worker, leader.pid()}, 'S', ProcScanScope::Holders);
  const ProcessInfo* info = table.find(holder.pid());
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->holds_gpu_minor(0));
  EXPECT_TRUE(info->details_loaded);
  EXPECT_EQ(info->pgid, leader.pid());
  EXPECT_NE(table.find(leader.pid()), nullptr) << "the holder's process-group leader";
  const std::vector<pid_t> chain = table.ancestry(holder.pid());
  ASSERT_GE(chain.size(), 2u);
  EXPECT_EQ(chain[1], getpid());
  EXPECT_TRUE(chain.back() == 1 || table.find(chain.back()) == nullptr)
      << "ancestry reaches PID 1 or a process this /proc cannot show";
  EXPECT_EQ(table.children_of(holder.pid()), std::vector<pid_t>{worker});
  ASSERT_NE(table.find(worker), nullptr);
  EXPECT_FALSE(table.find(worker)->holds_any_device_file());
  EXPECT_EQ(table.find(bystander.pid()), nullptr) << "a bystander is not read in full";

  const ProcessTable everything = scan_live(dev.path());
  EXPECT_NE(everything.find(bystander.pid()), nullptr);
}

// A driver-listed PID that holds no device file here (or whose tree ps draws): load_trees
// brings it and its descendants into a Holders-scope table with their details.
TEST(ProcTableLive, LoadTreesReadsARootAndItsDescendantsLeftOutByTheScope) {
  const FakeDevDir dev;
  const Pipe child_pid;
  Child root([&] {
    child_pid.send(fork_pausing());
    pause();
  });
  const pid_t child = child_pid.receive();
  const KillOnExit end_child{child};
  ASSERT_GT(child, 0);

  ProcessTable table = scan_until_state(dev.path(), {}, 'S', ProcScanScope::Holders);
  EXPECT_EQ(table.find(root.pid()), nullptr);
  const pid_t roots[] = {root.pid()};
  table.load_trees(roots);
  ASSERT_NE(table.find(root.pid()), nullptr);
  ASSERT_NE(table.find(child), nullptr);
  EXPECT_TRUE(table.find(root.pid())->details_loaded);
  EXPECT_TRUE(table.find(child)->details_loaded);
  EXPECT_EQ(table.find(child)->cmdline, own_cmdline());
  EXPECT_EQ(table.children_of(root.pid()), std::vector<pid_t>{child});
}

TEST(ProcTableLive, ScanningWhileProcessesComeAndGoNeverThrows) {
  const FakeDevDir dev;
  std::atomic<bool> done{false};
  std::atomic<int> spawned{0};
  const std::string nvidia0 = dev.file("nvidia0");
  std::thread spawner([&] {
    std::vector<pid_t> live;
    for (int i = 0; i < 200; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        if (i % 2 == 0) open(nvidia0.c_str(), O_RDONLY);  // some of them are holders
        const timespec nap{0, (i % 7) * 300'000L};
        nanosleep(&nap, nullptr);
        _exit(0);
      }
      if (pid > 0) {
        live.push_back(pid);
        spawned.fetch_add(1);
      }
      if (live.size() >= 16) {
        waitpid(live.front(), nullptr, 0);
        live.erase(live.begin());
      }
    }
    for (const pid_t pid : live) waitpid(pid, nullptr, 0);
    done = true;
  });
  int scans = 0;
  while (!done || scans < 3) {
    try {
      ProcessTable table = scan_live(dev.path());
      EXPECT_NE(table.find(getpid()), nullptr);
      std::vector<pid_t> all;
      for (const auto& [pid, info] : table.processes()) all.push_back(pid);
      table.load_details(all);  // many of them have exited by now
    } catch (const std::exception& e) {
      ADD_FAILURE() << "scan threw: " << e.what();
    }
    ++scans;
  }
  spawner.join();
  EXPECT_EQ(spawned.load(), 200);
  EXPECT_GE(scans, 3);
}

// Without the rights to read another user's descriptors, the process is still listed, marked
// Denied, and the scan goes on. Needs root to become an unprivileged user.
TEST(ProcTableLive, OtherUsersDescriptorsAreDeniedNotFatal) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch to an unprivileged user";
  const pid_t test_pid = getpid();
  Child child([test_pid] {
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(80);
    prctl(PR_SET_DUMPABLE, 1);
    ProcessTable table = scan_live("/dev");
    const ProcessInfo* root_process = table.find(test_pid);
    const ProcessInfo* self = table.find(getpid());
    if (root_process == nullptr || self == nullptr) _exit(81);
    if (root_process->fd_access != FdAccess::Denied) _exit(82);
    if (self->fd_access != FdAccess::Ok) _exit(83);
    // ps's scope keeps the processes it may not inspect, so it can say how many there are.
    const ProcessTable holders_only = scan_live("/dev", ProcScanScope::Holders);
    const ProcessInfo* denied = holders_only.find(test_pid);
    if (denied == nullptr || denied->fd_access != FdAccess::Denied) _exit(86);
    const pid_t asked[] = {test_pid, getpid()};
    table.load_details(asked);
    if (table.find(test_pid)->exe != "") _exit(84);  // exe of another user: denied
    if (table.find(getpid())->user != "nobody" && table.find(getpid())->user != "65534") _exit(85);
    _exit(0);
  });
  EXPECT_EQ(child.wait_exit_code(), 0);
}

// /proc mounted by a process in a new PID namespace shows that namespace: a scan of it
// must say we are in a child namespace and list only the processes inside.
TEST(ProcTableLive, DetectsAChildPidNamespace) {
  {
    const ProcessTable host = scan_live("/dev");
    std::error_code error;
    const auto ns = fs::read_symlink("/proc/self/ns/pid", error);
    if (!error) {
      EXPECT_EQ(host.in_child_pid_namespace(), ns.string() != "pid:[4026531836]");
    }
  }
  char pattern[] = "/tmp/gpureap-procmnt-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string mount_point = pattern;
  Child outer([&] {
    if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) _exit(77);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(77);
    const pid_t init = fork();  // PID 1 of the new namespace
    if (init == 0) {
      if (mount("proc", mount_point.c_str(), "proc", 0, nullptr) != 0) _exit(77);
      ProcScanOptions options;
      options.proc_root = mount_point;
      const ProcessTable table = ProcessTable::scan(options);
      if (!table.in_child_pid_namespace()) _exit(1);
      if (table.find(1) == nullptr || table.processes().size() != 1) _exit(2);
      _exit(0);
    }
    int status = 0;
    if (init < 0 || waitpid(init, &status, 0) != init) _exit(3);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 4);
  });
  const int code = outer.wait_exit_code();
  rmdir(mount_point.c_str());
  if (code == 77) GTEST_SKIP() << "cannot create a PID namespace here (needs CAP_SYS_ADMIN)";
  EXPECT_EQ(code, 0);
}

// A view that repeats its scans (top) looks again at a process without a GPU device file only
// every few scans, and at a new PID at once; a holder it always reads.
TEST(ProcTableLive, RepeatedScansLookAtNewProcessesAtOnceAndAtQuietOnesEveryFewScans) {
  const FakeDevDir dev;
  const Pipe ready, go;
  Child quiet([&] {
    ready.send(getpid());
    pid_t ignored = 0;
    if (read(go.fds[0], &ignored, sizeof ignored) != sizeof ignored) _exit(92);
    open_or_die(dev.file("nvidia0"));  // long after it started: the case the memory can be late for
    ready.send(getpid());
    pause();
  });
  ASSERT_EQ(ready.receive(), quiet.pid());
  constexpr unsigned kEvery = 3;
  ProcScanOptions options;
  options.dev_dir = dev.path();
  options.scope = ProcScanScope::Holders;
  options.memory = std::make_shared<FdLookMemory>(kEvery);
  EXPECT_EQ(ProcessTable::scan(options).find(quiet.pid()), nullptr);
  EXPECT_GT(options.memory->remembered(), 0u);

  go.send(1);
  ASSERT_EQ(ready.receive(), quiet.pid());
  // A new process holding the file: found by the next scan, whatever the memory says.
  Child fresh([&] {
    open_or_die(dev.file("nvidia0"));
    ready.send(getpid());
    pause();
  });
  ASSERT_EQ(ready.receive(), fresh.pid());
  const ProcessTable next = ProcessTable::scan(options);
  ASSERT_NE(next.find(fresh.pid()), nullptr);
  EXPECT_TRUE(next.find(fresh.pid())->holds_gpu_minor(0));
  // The quiet one that opened it since: within kEvery scans.
  unsigned scans = 1;
  bool found = next.find(quiet.pid()) != nullptr;
  for (; !found && scans <= kEvery; ++scans) found = ProcessTable::scan(options).find(quiet.pid()) != nullptr;
  EXPECT_TRUE(found) << "not seen after " << scans << " scans";
  // Holders are read at every scan, their details (kept between scans) as the first time.
  for (int i = 0; i < 4; ++i) {
    const ProcessTable table = ProcessTable::scan(options);
    const ProcessInfo* holder = table.find(fresh.pid());
    ASSERT_NE(holder, nullptr);
    EXPECT_TRUE(holder->details_loaded);
    EXPECT_EQ(holder->cmdline, own_cmdline());
    EXPECT_EQ(holder->uid, geteuid());
  }
}

}  // namespace
}  // namespace gpureap

namespace gpureap {
namespace {

// A scan given the holders to read (the event-kept set) checks each one's GPU descriptors of its
// last full listing instead of listing fd/: a close or another file at that number sends it to
// a full listing, a GPU descriptor gained without an event shows only at the next full listing,
// and a scan of every process (what an action reads) lists everything.
TEST(ProcTableLive, AKeptHolderIsProvenByItsLastListingsDescriptorsAndAnActionsScanReadsThemAll) {
  const FakeDevDir dev;
  const std::string beside = dev.file("not-a-gpu");
  std::ofstream(beside).put('\0');
  std::ofstream(dev.file("nvidia1")).put('\0');
  const Pipe ready, go;
  // Each byte read from `go` is the next step; its fd/ is then reported back.
  Child holder([&] {
    const int gpu = open(dev.file("nvidia0").c_str(), O_RDONLY | O_CLOEXEC);
    if (gpu < 0) _exit(91);
    int ctl = -1;
    ready.send(getpid());
    for (char step = 0; read(go.fds[0], &step, 1) == 1;) {
      if (step == 'r') ctl = open(dev.file("nvidiactl").c_str(), O_RDONLY | O_CLOEXEC);  // as if received
      if (step == 'g') {  // another GPU's node at the first one's number
        const int other = open(dev.file("nvidia1").c_str(), O_RDONLY | O_CLOEXEC);
        if (other < 0 || dup2(other, gpu) != gpu) _exit(92);
        close(other);
      }
      if (step == 'c') close(gpu);
      if (step == 'o') {
        const int other = open(beside.c_str(), O_RDONLY | O_CLOEXEC);
        if (other < 0 || dup2(other, ctl) != ctl) _exit(93);
        close(other);
      }
      ready.send(getpid());
    }
    _exit(0);
  });
  const pid_t pid = holder.pid();
  ASSERT_EQ(ready.receive(), pid);
  const auto step = [&](char what) {
    ASSERT_EQ(write(go.fds[1], &what, 1), 1);
    ASSERT_EQ(ready.receive(), pid);
  };
  ProcScanOptions options;
  options.dev_dir = dev.path();
  options.scope = ProcScanScope::Holders;
  options.memory = std::make_shared<FdLookMemory>(1, 1000);  // no listing by the cadence in this test
  options.only_pids = std::make_shared<const std::vector<pid_t>>(std::vector<pid_t>{pid});
  const auto files = [&](ProcScanScope scope) {
    options.scope = scope;
    const ProcessTable table = ProcessTable::scan(options);
    std::vector<std::string> paths;
    if (const ProcessInfo* info = table.find(pid)) {
      for (const DeviceFileHandle& file : info->device_files) paths.push_back(file.path);
    }
    return paths;
  };
  const std::vector<std::string> gpu{dev.file("nvidia0")};
  const std::vector<std::string> ctl{dev.file("nvidiactl")};
  const std::vector<std::string> both{dev.file("nvidia0"), dev.file("nvidiactl")};  // by descriptor
  EXPECT_EQ(files(ProcScanScope::Holders), gpu) << "the first look lists fd/";

  step('r');  // a second GPU descriptor, gained where no event would tell
  EXPECT_EQ(files(ProcScanScope::Holders), gpu) << "its last listing's descriptors, checked";
  EXPECT_EQ(files(ProcScanScope::Everything), both) << "an action's scan reads every descriptor";
  options.memory->forget_files(pid);  // an event on it
  EXPECT_EQ(files(ProcScanScope::Holders), both) << "listed in full after an event";

  step('g');  // the same number, another GPU: its node, not its number, is what is checked
  const std::vector<std::string> other_gpu{dev.file("nvidia1"), dev.file("nvidiactl")};
  EXPECT_EQ(files(ProcScanScope::Holders), other_gpu);
  EXPECT_EQ(files(ProcScanScope::Holders), other_gpu);

  step('c');  // the first one closed
  EXPECT_EQ(files(ProcScanScope::Holders), ctl);
  EXPECT_EQ(files(ProcScanScope::Holders), ctl);
  step('o');  // another file at the number of the last one
  EXPECT_EQ(files(ProcScanScope::Holders), std::vector<std::string>{}) << "no longer a holder";
  EXPECT_EQ(files(ProcScanScope::Everything), std::vector<std::string>{});
}

// A holder goes through the files kept from its full look (its /proc/<pid> directory, stat and
// children): a child it forks later is in the next scan's tree, and once it is reaped the kept
// files read nothing and it is out of the table, its files let go. Between full looks (only its
// GPU descriptors checked) and at each (details_every 1: fd/ listed through the kept directory).
void kept_holder_files_case(unsigned details_every) {
  SCOPED_TRACE(details_every);
  const FakeDevDir dev;
  const Pipe ready, go;
  Child holder([&] {
    const int gpu = open(dev.file("nvidia0").c_str(), O_RDONLY | O_CLOEXEC);
    if (gpu < 0) _exit(91);
    ready.send(getpid());
    for (char step = 0; read(go.fds[0], &step, 1) == 1;) ready.send(fork_pausing(gpu));
    _exit(0);
  });
  const pid_t pid = holder.pid();
  ASSERT_EQ(ready.receive(), pid);
  ProcScanOptions options;
  options.dev_dir = dev.path();
  options.scope = ProcScanScope::Holders;
  options.memory = std::make_shared<FdLookMemory>(1, details_every);
  options.only_pids = std::make_shared<const std::vector<pid_t>>(std::vector<pid_t>{pid});
  {
    const ProcessTable first = ProcessTable::scan(options);
    ASSERT_NE(first.find(pid), nullptr);
    EXPECT_TRUE(first.children_of(pid).empty());
  }
  EXPECT_EQ(options.memory->files_kept(), 1u);

  const char fork_one = 'f';
  ASSERT_EQ(write(go.fds[1], &fork_one, 1), 1);
  const KillOnExit child{ready.receive()};
  ASSERT_GT(child.pid, 0);
  {
    const ProcessTable second = ProcessTable::scan(options);
    ASSERT_NE(second.find(pid), nullptr);
    EXPECT_EQ(second.find(pid)->device_files.size(), 1u);
    EXPECT_EQ(second.children_of(pid), std::vector<pid_t>{child.pid}) << "read through the kept children file";
  }
  EXPECT_EQ(options.memory->files_kept(), 1u);

  holder.kill_and_reap();
  const ProcessTable after = ProcessTable::scan(options);
  EXPECT_EQ(after.find(pid), nullptr);
  EXPECT_EQ(options.memory->files_kept(), 0u);
}

TEST(ProcTableLive, AKeptHoldersFilesShowItsNewChildrenAndNothingOnceItIsReaped) {
  kept_holder_files_case(1000);
  kept_holder_files_case(1);
}

}  // namespace
}  // namespace gpureap
