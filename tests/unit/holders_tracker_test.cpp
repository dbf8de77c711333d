// The event-kept holder set with real processes on device files made as the simulator makes
// them (regular files in a directory of their own, GPUREAP_DEV_DIR's kind): opens, dups, forks,
// execs, setsid, exits, a descriptor passed over a socket (no open event: the walk must find
// it), a PID reused, a queue overflowed, and the fallback without the capability.
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "holders/holder_tracker.hpp"
#include "proc/process_table.hpp"
#include "snapshot/holder_events.hpp"
#include "stepped_child.hpp"

namespace gpureap {
namespace {

namespace fs = std::filesystem;
using holders::HolderTracker;
using holders::HolderTrackerOptions;

// A directory with the simulator's kind of GPU nodes: regular files.
class DeviceDir {
 public:
  DeviceDir() {
    char name[] = "/tmp/gpureap-holders-XXXXXX";
    path_ = ::mkdtemp(name);
    for (const char* node : {"nvidiactl", "nvidia0", "nvidia1", "not-a-gpu"}) std::ofstream(path_ + "/" + node).put('\n');
  }
  ~DeviceDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string node(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

using Child = test::SteppedChild;

bool eventually(const std::function<bool()>& condition, int timeout_ms = 5000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

// The holders a walk of /proc finds (ps's scope), as the snapshot's reconciliation walks.
std::vector<pid_t> walk(const DeviceDir& dev) {
  ProcScanOptions options;
  options.dev_dir = dev.path();
  options.scope = ProcScanScope::Holders;
  const ProcessTable table = ProcessTable::scan(options);
  std::vector<pid_t> pids;
  for (const auto& [pid, process] : table.processes()) {
    if (process.holds_any_gpu_file()) pids.push_back(pid);
  }
  return pids;
}

class HolderTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "fanotify and the process-events connector need root";
  }
  // A tracker that has done its first walk (nothing held yet).
  std::unique_ptr<HolderTracker> started() {
    HolderTrackerOptions options;
    options.dev_dir = dev_.path();
    std::string why;
    auto tracker = HolderTracker::start(options, why);
    EXPECT_NE(tracker, nullptr) << why;
    if (tracker) {
      tracker->refresh();
      tracker->reconcile(walk(dev_));
    }
    return tracker;
  }
  bool seen(HolderTracker& tracker, pid_t pid) {
    return eventually([&] {
      tracker.refresh();
      return tracker.tracks(pid);
    });
  }
  bool let_go(HolderTracker& tracker, pid_t pid) {
    return eventually([&] {
      tracker.refresh();
      return !tracker.tracks(pid);
    });
  }
  // Waits until the tracker has proven something more than `before` times.
  bool proved_since(HolderTracker& tracker, std::uint64_t before) {
    return eventually([&] {
      tracker.refresh();
      return tracker.counts().proofs > before;
    });
  }

  DeviceDir dev_;
};

TEST_F(HolderTrackerTest, AnOpenerIsAHolderAtOnceAndABystanderNever) {
  auto tracker = started();
  ASSERT_NE(tracker, nullptr);
  EXPECT_EQ(tracker->counts().nodes_marked, 3u);  // nvidiactl, nvidia0, nvidia1: not not-a-gpu
  const std::string other = dev_.node("not-a-gpu");
  Child bystander({[&] {
    const int fd = ::open(other.c_str(), O_RDONLY);  // a file beside the nodes, not one
    (void)fd;
  }});
  ASSERT_TRUE(bystander.step());
  const std::string node = dev_.node("nvidia0");
  Child holder({[&] { (void)::open(node.c_str(), O_RDWR); }});
  ASSERT_TRUE(holder.step());
  ASSERT_TRUE(seen(*tracker, holder.pid()));
  // The bystander acted before the holder opened: its events, had it any, were read first.
  EXPECT_FALSE(tracker->tracks(bystander.pid()));
  EXPECT_EQ(tracker->holders(), std::vector<pid_t>{holder.pid()});
  EXPECT_EQ(tracker->counts().missed, 0u);
}

TEST_F(HolderTrackerTest, AnOpenClosedAgainIsNoHolder) {
  auto tracker = started();
  ASSERT_NE(tracker, nullptr);
  const std::string node = dev_.node("nvidia1");
  Child prober({[&] { ::close(::open(node.c_str(), O_RDONLY)); }});
  ASSERT_TRUE(prober.step());
  ASSERT_TRUE(proved_since(*tracker, 0));
  EXPECT_FALSE(tracker->tracks(prober.pid()));
}

TEST_F(HolderTrackerTest, ADupKeepsItAndTheLastCloseLetsItGo) {
  auto tracker = started();
  ASSERT_NE(tracker, nullptr);
  const std::string node = dev_.node("nvidia0");
  int fd = -1;
  Child holder({[&] { fd = ::open(node.c_str(), O_RDWR); },
                [&] {
                  const int copy = ::dup(fd);
                  ::close(fd);
                  fd = copy;
                },
                [&] { ::close(fd); }});
  ASSERT_TRUE(holder.step());
  ASSERT_TRUE(seen(*tracker, holder.pid()));
  ASSERT_TRUE(holder.step());  // dup, the first descriptor closed: the file is still open
  std::vector<pid_t> walked = walk(dev_);
  EXPECT_NE(std::find(walked.begin(), walked.end(), holder.pid()), walked.end());
  tracker->refresh();
  EXPECT_TRUE(tracker->tracks(holder.pid()));
  ASSERT_TRUE(holder.step());  // the last descriptor: FAN_CLOSE
  EXPECT_TRUE(let_go(*tracker, holder.pid()));
}

TEST_F(HolderTrackerTest, AForkedChildOfAHolderIsOneWithoutOpeningAnything) {
  auto tracker = started();
  ASSERT_NE(tracker, nullptr);
  const std::string node = dev_.node("nvidia0");
  int pipe_to_parent[2];
  ASSERT_EQ(::pipe(pipe_to_parent), 0);
  Child holder({[&] { (void)::open(node.c_str(), O_RDWR); },
                [&] {
                  // setsid first (a job that leaves its terminal's session), then a worker that
                  // inherits the descriptor and reports its PID.
                  ::setsid();
                  const pid_t worker = ::fork();
                  if (worker == 0) {
                    const pid_t self = ::getpid();
                    if (::write(pipe_to_parent[1], &self, sizeof self) != sizeof self) ::_exit(1);
                    ::pause();
                    ::_exit(0);
                  }
                }});
  ASSERT_TRUE(holder.step());
  ASSERT_TRUE(seen(*tracker, holder.pid()));
  ASSERT_TRUE(holder.step());
  pid_t worker = 0;
  ASSERT_EQ(::read(pipe_to_parent[0], &worker, sizeof worker), static_cast<ssize_t>(sizeof worker));
  ::close(pipe_to_parent[0]);
  ::close(pipe_to_parent[1]);
  EXPECT_TRUE(seen(*tracker, worker));
  EXPECT_GE(tracker->counts().forks_followed, 1u);
  // The holder's end leaves the worker holding: it stays, the holder goes.
  holder.end();
  EXPECT_TRUE(let_go(*tracker, holder.pid()));
  EXPECT_TRUE(tracker->tracks(worker));
  ::kill(worker, SIGKILL);
  EXPECT_TRUE(let_go(*tracker, worker));  // reaped by init: an exit the connector reports
  EXPECT_EQ(tracker->counts().missed, 0u);
}

// An opener that forks a worker and is gone (reaped) before the tracker reads its open: the
// event has no process left to pin, yet the worker holds what it opened and is followed from
// the fork, not left for the next walk.
TEST_F(HolderTrackerTest, AWorkerOfAnOpenerGoneBeforeItsEventsAreReadIsFollowed) {
  auto tracker = started();
  ASSERT_NE(tracker, nullptr);
  const std::string node = dev_.node("nvidia0");
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t opener = ::fork();
  if (opener == 0) {
    (void)::open(node.c_str(), O_RDWR);
    const pid_t worker = ::fork();
    if (worker == 0) {
      ::pause();
      ::_exit(0);
    }
    if (::write(report[1], &worker, sizeof worker) != sizeof worker) ::_exit(1);
    ::_exit(0);
  }
  ::close(report[1]);
  pid_t worker = 0;
  ASSERT_EQ(::read(report[0], &worker, sizeof worker), static_cast<ssize_t>(sizeof worker));
  ::close(report[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(opener, &status, 0), opener);
  EXPECT_TRUE(seen(*tracker, worker)) << "the worker holds the descriptor its gone parent opened";
  EXPECT_FALSE(tracker->tracks(opener));
  EXPECT_EQ(tracker->counts().missed, 0u);
  ::kill(worker, SIGKILL);
  EXPECT_TRUE(let_go(*tracker, worker));  // reaped by init: an exit the connector reports
}

// An opener that forks a worker and is gone (reaped) between a refresh's two reads: that
// refresh reads its open (no pidfd: gone) but not its fork, which the next one reads. The
// worker holds what its parent opened and is followed from that fork, not left for the walk.
TEST_F(HolderTrackerTest, AWorkerForkedBetweenTheTwoReadsOfARefreshIsFollowedInTheNext) {
  const std::string node = dev_.node("nvidia0");
  bool armed = false;
  pid_t opener = 0;
  pid_t worker = 0;
  HolderTrackerOptions options;
  options.dev_dir = dev_.path();
  options.between_reads = [&] {
    if (!armed || opener != 0) return;
    int report[2];
    if (::pipe(report) != 0) return;
    opener = ::fork();
    if (opener == 0) {
      (void)::open(node.c_str(), O_RDWR);
      const pid_t child = ::fork();
      if (child == 0) {
        ::pause();
        ::_exit(0);
      }
      if (::write(report[1], &child, sizeof child) != sizeof child) ::_exit(1);
      ::_exit(0);
    }
    ::close(report[1]);
    if (::read(report[0], &worker, sizeof worker) != static_cast<ssize_t>(sizeof worker)) worker = 0;
    ::close(report[0]);
    ::waitpid(opener, nullptr, 0);
  };
  std::string why;
  auto tracker = HolderTracker::start(options, why);
  ASSERT_NE(tracker, nullptr) << why;
  tracker->refresh();
  tracker->reconcile(walk(dev_));
  armed = true;
  tracker->refresh();  // the opener opens, forks and is reaped between this refresh's reads
  ASSERT_GT(opener, 0);
  ASSERT_GT(worker, 0);
  EXPECT_TRUE(seen(*tracker, worker)) << "the worker holds the descriptor its gone parent opened";
  EXPECT_FALSE(tracker->tracks(opener));
  tracker->reconcile(walk(dev_));
  EXPECT_EQ(tracker->counts().missed, 0u);
  EXPECT_TRUE(tracker->take_missed_notes().empty());
  ::kill(worker, SIGKILL);
  EXPECT_TRUE(let_go(*tracker, worker));  // reaped by init: an exit the connector reports
}

TEST_F(HolderTrackerTest, AnExecClosesCloseOnExecDescriptorsAndKeepsTheOthers) {
  auto tracker = started();
  ASSERT_NE(tracker, nullptr);
  for (const bool close_on_exec : {true, false}) {
    SCOPED_TRACE(close_on_exec ? "O_CLOEXEC" : "inherited across exec");
    const std::string node = dev_.node("nvidia1");
    Child holder({[&] { (void)::open(node.c_str(), O_RDWR | (close_on_exec ? O_CLOEXEC : 0)); },
                  [&] {
                    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
                    ::_exit(127);
                  }});
    ASSERT_TRUE(holder.step());
    ASSERT_TRUE(seen(*tracker, holder.pid()));
    const std::uint64_t proofs = tracker->counts().proofs;
    // The step never answers: exec replaced the program (its ack pipe is close-on-exec).
    EXPECT_FALSE(holder.step());
    ASSERT_TRUE(proved_since(*tracker, proofs));
    if (close_on_exec) {
      EXPECT_TRUE(let_go(*tracker, holder.pid()));
    } else {
      EXPECT_TRUE(tracker->tracks(holder.pid()));
    }
  }
}

TEST_F(HolderTrackerTest, ADescriptorPassedOverASocketIsFoundByTheWalkAndCountedMissed) {
  auto tracker = started();
  ASSERT_NE(tracker, nullptr);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  const std::string node = dev_.node("nvidia0");
  Child sender({[&] {
    const int fd = ::open(node.c_str(), O_RDWR);
    if (!test::send_descriptor(pair[0], fd)) ::_exit(1);
    ::close(fd);
  }});
  Child receiver({[&] {
    if (!test::receive_descriptor(pair[1])) ::_exit(1);
  }});
  ::close(pair[0]);
  ::close(pair[1]);
  ASSERT_TRUE(sender.step());
  ASSERT_TRUE(receiver.step());
  // The sender's open was proven when its descriptor was already closed; the receiver's
  // descriptor is no open of its own.
  ASSERT_TRUE(proved_since(*tracker, 0));
  EXPECT_FALSE(tracker->tracks(sender.pid()));
  EXPECT_FALSE(tracker->tracks(receiver.pid()));
  const std::vector<pid_t> walked = walk(dev_);
  ASSERT_NE(std::find(walked.begin(), walked.end(), receiver.pid()), walked.end());
  tracker->refresh();
  tracker->reconcile(walked);
  EXPECT_TRUE(tracker->tracks(receiver.pid()));
  EXPECT_EQ(tracker->counts().missed, 1u);
  // Explained from what the events said of it: forked by the test (no holder), no open.
  const std::vector<std::string> notes = tracker->take_missed_notes();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind(std::to_string(receiver.pid()) + ": forked by " + std::to_string(::getpid()), 0), 0u)
      << notes[0];
  EXPECT_NE(notes[0].find("not followed"), std::string::npos) << notes[0];
  EXPECT_EQ(notes[0].find("open read"), std::string::npos) << notes[0];
}

// The next fork gets `pid` (ns_last_pid of the initial namespace): other processes of the
// host fork too, so it is tried again until it lands.
pid_t fork_as(pid_t pid, const std::function<void()>& body) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    {
      std::ofstream last("/proc/sys/kernel/ns_last_pid");
      last << pid - 1;
    }
    const pid_t child = ::fork();
    if (child == 0) {
      if (::getpid() != pid) ::_exit(0);
      body();
      ::_exit(0);
    }
    if (child == pid) return child;
    ::waitpid(child, nullptr, 0);
  }
  return -1;
}

TEST_F(HolderTrackerTest, APidReusedBetweenEventsNamesTheNewProcessOnly) {
  auto tracker = started();
  ASSERT_NE(tracker, nullptr);
  const std::string node = dev_.node("nvidia0");
  pid_t reused = 0;
  {
    Child holder({[&] { (void)::open(node.c_str(), O_RDWR); }});
    ASSERT_TRUE(holder.step());
    ASSERT_TRUE(seen(*tracker, holder.pid()));
    reused = holder.pid();
  }  // ended and reaped, no refresh since: its exit is still queued
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  // A stranger at the same PID that opens nothing.
  const pid_t stranger = fork_as(reused, [&] {
    if (::write(ready[1], "r", 1) != 1) ::_exit(1);
    ::pause();
  });
  if (stranger < 0) GTEST_SKIP() << "PID " << reused << " could not be had again (a busy host)";
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  const std::uint64_t proofs = tracker->counts().proofs;
  ASSERT_TRUE(proved_since(*tracker, proofs));
  EXPECT_FALSE(tracker->tracks(reused));
  ::kill(stranger, SIGKILL);
  ::waitpid(stranger, nullptr, 0);
  // And one at the same PID that opens: a holder of its own, proven.
  const pid_t opener = fork_as(reused, [&] {
    (void)::open(node.c_str(), O_RDWR);
    if (::write(ready[1], "r", 1) != 1) ::_exit(1);
    ::pause();
  });
  if (opener < 0) GTEST_SKIP() << "PID " << reused << " could not be had again (a busy host)";
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_TRUE(seen(*tracker, reused));
  ::kill(opener, SIGKILL);
  ::waitpid(opener, nullptr, 0);
  EXPECT_TRUE(let_go(*tracker, reused));
  ::close(ready[0]);
  ::close(ready[1]);
}

// fanotify's queue length for groups made while it lives (fs.fanotify.max_queued_events).
class SmallFanotifyQueue {
 public:
  explicit SmallFanotifyQueue(int events) {
    std::ifstream("/proc/sys/fs/fanotify/max_queued_events") >> saved_;
    std::ofstream("/proc/sys/fs/fanotify/max_queued_events") << events;
  }
  ~SmallFanotifyQueue() { restore(); }
  void restore() {
    if (saved_ > 0) std::ofstream("/proc/sys/fs/fanotify/max_queued_events") << saved_;
    saved_ = 0;
  }

 private:
  int saved_ = 0;
};

TEST_F(HolderTrackerTest, AnOverflowedQueueAsksForAWalkThatFindsEveryHolder) {
  std::unique_ptr<HolderTracker> tracker;
  {
    SmallFanotifyQueue small(2);
    tracker = started();
  }
  ASSERT_NE(tracker, nullptr);
  const std::string node = dev_.node("nvidia0");
  std::vector<std::unique_ptr<Child>> holders;
  for (int i = 0; i < 6; ++i) {
    holders.push_back(std::make_unique<Child>(std::vector<Child::Step>{[&] { (void)::open(node.c_str(), O_RDWR); }}));
    ASSERT_TRUE(holders.back()->step());
  }
  tracker->refresh();
  EXPECT_TRUE(tracker->needs_walk());
  EXPECT_GE(tracker->counts().lost, 1u);
  tracker->reconcile(walk(dev_));
  EXPECT_FALSE(tracker->needs_walk());
  for (const auto& holder : holders) EXPECT_TRUE(tracker->tracks(holder->pid())) << holder->pid();
}

// In a child without CAP_SYS_ADMIN: what start says, and what the snapshot's side does.
TEST_F(HolderTrackerTest, WithoutTheCapabilityEveryScanWalksAndSaysWhyOnce) {
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const std::string dev = dev_.path();
  const pid_t child = ::fork();
  if (child == 0) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (::syscall(SYS_capget, &header, data) != 0) ::_exit(2);
    data[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
    data[CAP_SYS_ADMIN / 32].permitted &= ~(1u << (CAP_SYS_ADMIN % 32));
    if (::syscall(SYS_capset, &header, data) != 0) ::_exit(3);
    ProcScanOptions proc;
    proc.dev_dir = dev;
    HolderEvents events(300);
    const bool walks = events.before_scan(proc) == nullptr && events.before_scan(proc) == nullptr;
    const std::string line = std::string(walks && !events.state().active ? "walks" : "events") + "|" +
                             events.state().fallback_reason;
    if (::write(report[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) ::_exit(4);
    ::_exit(0);
  }
  ::close(report[1]);
  std::string line(512, '\0');
  const ssize_t n = ::read(report[0], line.data(), line.size());
  ::close(report[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  line.resize(static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
  EXPECT_EQ(line, "walks|holders found by walking /proc at every scan: fanotify: not permitted (needs CAP_SYS_ADMIN)");
}

TEST(HolderTracker, AProcThatIsNotOursGivesNoEvents) {
  HolderTrackerOptions options;
  options.proc_root = GPUREAP_FIXTURE_DIR;
  std::string why;
  EXPECT_EQ(HolderTracker::start(options, why), nullptr);
  EXPECT_EQ(why, std::string(GPUREAP_FIXTURE_DIR) + " is not a procfs mount");
}

}  // namespace
}  // namespace gpureap
