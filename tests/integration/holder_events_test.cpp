// The holder set kept from the kernel's events, through the real binary: `gpureap export` with
// a reconciliation an hour away can learn of a holder only from events, so what its next scrape
// shows is what the events brought. Beside it, one that walks /proc every second counts what
// its walks found that the events had missed. Real processes on the simulator's device files:
// an open, a holder's worker that opens nothing, its exit, a dup, setsid and exec that keep the
// descriptor, a descriptor received over a Unix socket (no open event), a bystander; ps --watch
// on the same events; and without them (no capability, GPUREAP_HOLDER_EVENTS=off), the walk
// at every collection, said once.
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "export_support.hpp"
#include "watch_support.hpp"
#include "sim_harness.hpp"
#include "stepped_child.hpp"

namespace gpureap::test {
namespace holder_events_test {

// The holders of GPU `gpu`'s device files the scrape counts but NVML clients: each exporter
// here is one (its NVML library holds every GPU's device file) to the other.
double holders_of_gpu(const Scrape& scrape, const std::string& gpu) {
  double total = 0;
  for (const ScrapedSample* sample : scrape.all("gpureap_gpu_holders")) {
    if (sample->labels.at("gpu") == gpu && sample->labels.at("role") != "client") total += sample->value;
  }
  return total;
}

// Polls `server`'s scrapes (bounded) until GPU `gpu` has `count` holders.
bool scrape_shows(const ExportServer& server, const std::string& gpu, double count) {
  return eventually([&] { return holders_of_gpu(server.scrape(), gpu) == count; }, 10000);
}

double counter(const ExportServer& server, const std::string& name) {
  return server.scrape().value(name).value_or(-1);
}

// Waits for `server` (which walks every second) to reconcile once more from now on.
bool walked_again(const ExportServer& server) {
  const double walks = counter(server, "gpureap_holder_walks_total");
  return eventually([&] { return counter(server, "gpureap_holder_walks_total") > walks; }, 10000);
}

// The program `pid` runs now (its comm).
std::string comm_of(pid_t pid) {
  std::string comm;
  std::getline(std::ifstream("/proc/" + std::to_string(pid) + "/comm"), comm);
  return comm;
}

// Whether `pid` holds a descriptor of the file at `path`.
bool holds(pid_t pid, const std::string& path) {
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd/";
  for (int fd = 0; fd < 64; ++fd) {
    char target[PATH_MAX] = {};
    const ssize_t n = ::readlink((fd_dir + std::to_string(fd)).c_str(), target, sizeof target - 1);
    if (n > 0 && path == target) return true;
  }
  return false;
}

// Forks (each a fork and an exit event) beyond what the connector's receive buffer holds
// between two reads: about 8 MiB as the kernel counts it, some thousands of events.
constexpr int kForkFlood = 20000;

class HolderEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!running_as_root()) GTEST_SKIP() << "fanotify and the process-events connector need root";
    beside_ = host_.dev_dir() + "/not-a-gpu";
    std::ofstream(beside_) << "a file beside the device nodes\n";
  }
  // An exporter whose first collection (its first walk, after which it listens) is done.
  std::unique_ptr<ExportServer> exporter(const std::string& reconcile) {
    auto server = std::make_unique<ExportServer>(
        host_, std::vector<std::string>{"--reconcile", reconcile, "--cache", "0", "--no-kernel-log"});
    EXPECT_TRUE(server->serving()) << server->stderr_text();
    if (!server->serving()) return nullptr;
    const Scrape first = server->scrape();
    EXPECT_EQ(first.value("gpureap_holder_events_active"), 1) << server->stderr_text();
    EXPECT_EQ(first.value("gpureap_holder_walks_total"), 1);
    return server;
  }
  std::string node(const char* name) const { return host_.dev_dir() + "/" + name; }

  SimHost host_;
  std::string beside_;
};

TEST_F(HolderEvents, AnOpenAWorkerAndTheirEndsAreInTheNextScrapeWithoutAWalk) {
  const auto events = exporter("1h");
  const auto checked = exporter("1s");
  ASSERT_TRUE(events && checked);
  const std::string gpu0 = node("nvidia0"), gpu1 = node("nvidia1");

  SteppedChild bystander({[&] { (void)::open(beside_.c_str(), O_RDONLY); }});
  ASSERT_TRUE(bystander.step());
  int fd = -1;
  pid_t worker = 0;
  SteppedChild holder({
      [&] { fd = ::open(gpu0.c_str(), O_RDWR); },
      [&] {
        // A DataLoader worker: it inherits the descriptor and opens nothing.
        worker = ::fork();
        if (worker == 0) {
          ::prctl(PR_SET_PDEATHSIG, SIGKILL);
          ::pause();
          ::_exit(0);
        }
      },
      [&] {
        ::kill(worker, SIGKILL);
        ::waitpid(worker, nullptr, 0);
      },
      [&] {
        const int copy = ::dup(fd);
        ::close(fd);
        fd = copy;
        ::setsid();
      },
      [&] {
        ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
        ::_exit(127);
      },
  });

  ASSERT_TRUE(holder.step());  // the open
  EXPECT_TRUE(scrape_shows(*events, "0", 1)) << "the opener, and not the bystander who acted before it";
  EXPECT_TRUE(scrape_shows(*checked, "0", 1));

  ASSERT_TRUE(holder.step());  // the worker
  EXPECT_TRUE(scrape_shows(*events, "0", 2)) << "the worker, which opened nothing";
  EXPECT_TRUE(scrape_shows(*checked, "0", 2));
  EXPECT_TRUE(walked_again(*checked)) << "a reconciliation while the worker lives";

  ASSERT_TRUE(holder.step());  // the worker's end
  EXPECT_TRUE(scrape_shows(*events, "0", 1));

  // dup, setsid and exec make no open: the holder stays. A marker's open on the other GPU,
  // made after them, is read with (or after) their events: once it shows, theirs were read.
  ASSERT_TRUE(holder.step());  // dup and setsid
  EXPECT_FALSE(holder.step()) << "an exec never answers";
  ASSERT_TRUE(eventually([&] { return comm_of(holder.pid()) == "sleep"; }));
  SteppedChild marker({[&] { (void)::open(gpu1.c_str(), O_RDONLY); }});
  ASSERT_TRUE(marker.step());
  EXPECT_TRUE(scrape_shows(*events, "1", 1));
  EXPECT_EQ(holders_of_gpu(events->scrape(), "0"), 1) << "the holder after dup, setsid and exec";
  EXPECT_TRUE(walked_again(*checked)) << "a reconciliation after the exec";

  holder.end();
  marker.end();
  EXPECT_TRUE(scrape_shows(*events, "0", 0));
  EXPECT_TRUE(scrape_shows(*events, "1", 0));
  EXPECT_EQ(counter(*events, "gpureap_holder_walks_total"), 1) << "only the first collection walked";
  EXPECT_EQ(counter(*events, "gpureap_holder_events_lost_total"), 0);
  EXPECT_EQ(counter(*checked, "gpureap_holder_walk_missed_total"), 0) << "the walks found nothing the events missed";
  EXPECT_EQ(holders_of_gpu(checked->scrape(), "0"), 0);
}

// Between walks a holder no event touched is proven by the GPU descriptors of its last full
// look alone (proc/fd_look_memory.hpp): a close, or another file put at that number, makes no
// event, and must still end it; a descriptor moved to another number keeps it. Two scrapes
// after each open, so that the holder is past its first, full look.
TEST_F(HolderEvents, AKeptHolderThatClosesOrReplacesItsDescriptorLeavesAndOneThatMovesItStays) {
  const auto events = exporter("1h");
  ASSERT_TRUE(events);
  const std::string gpu0 = node("nvidia0");
  SteppedChild bystander({[&] { (void)::open(beside_.c_str(), O_RDONLY); }});
  ASSERT_TRUE(bystander.step());
  int closing_fd = -1, replaced_fd = -1, moved_fd = -1;
  SteppedChild closing({[&] { closing_fd = ::open(gpu0.c_str(), O_RDWR); }, [&] { ::close(closing_fd); }});
  SteppedChild replaced({[&] { replaced_fd = ::open(gpu0.c_str(), O_RDWR); },
                         [&] {
                           const int other = ::open(beside_.c_str(), O_RDONLY);
                           if (other < 0 || ::dup2(other, replaced_fd) != replaced_fd) ::_exit(1);
                           ::close(other);
                         }});
  SteppedChild moved({[&] { moved_fd = ::open(gpu0.c_str(), O_RDWR); },
                      [&] {
                        if (::dup2(moved_fd, 40) != 40) ::_exit(1);
                        ::close(moved_fd);
                      }});
  ASSERT_TRUE(closing.step());
  ASSERT_TRUE(replaced.step());
  ASSERT_TRUE(moved.step());
  EXPECT_TRUE(scrape_shows(*events, "0", 3)) << "the three openers, not the bystander";
  EXPECT_EQ(holders_of_gpu(events->scrape(), "0"), 3);

  ASSERT_TRUE(closing.step());
  EXPECT_TRUE(scrape_shows(*events, "0", 2)) << "the one that closed its descriptor";
  ASSERT_TRUE(replaced.step());
  EXPECT_FALSE(holds(replaced.pid(), gpu0));
  EXPECT_TRUE(scrape_shows(*events, "0", 1)) << "the one whose descriptor's number now names another file";
  ASSERT_TRUE(moved.step());
  EXPECT_TRUE(holds(moved.pid(), gpu0));
  // Each scrape collects anew (--cache 0) after the move: no wait is needed for what it shows.
  EXPECT_EQ(holders_of_gpu(events->scrape(), "0"), 1) << "the one that moved its descriptor to another number";
  EXPECT_EQ(holders_of_gpu(events->scrape(), "0"), 1);
  moved.end();
  EXPECT_TRUE(scrape_shows(*events, "0", 0)) << "the bystander never entered";
  EXPECT_EQ(counter(*events, "gpureap_holder_walks_total"), 1) << "only the first collection walked";
}

// --cache 60s: scrapes share a collection, but not past a holder's coming or going.
TEST_F(HolderEvents, ACachedCollectionIsNotServedOnceAHolderCameOrWent) {
  ExportServer server(host_, {"--reconcile", "1h", "--cache", "60s", "--no-kernel-log"});
  ASSERT_TRUE(server.serving()) << server.stderr_text();
  const double collections = counter(server, "gpureap_collections_total");
  EXPECT_EQ(counter(server, "gpureap_collections_total"), collections) << "nothing changed: the cached one";
  const std::string gpu0 = node("nvidia0");
  SteppedChild holder({[&] { (void)::open(gpu0.c_str(), O_RDWR); }});
  ASSERT_TRUE(holder.step());
  EXPECT_TRUE(scrape_shows(server, "0", 1)) << "within 10 s, not 60";
  holder.end();
  EXPECT_TRUE(scrape_shows(server, "0", 0));
  EXPECT_GE(counter(server, "gpureap_collections_total"), collections + 2);
}

// A descriptor received over a Unix socket is an open file the receiver never opened: no event
// names it. The events keep the sender; once the sender has gone, only a walk finds the
// receiver, counted as missed (the documented exception: docs/metrics.md).
TEST_F(HolderEvents, ADescriptorReceivedOverASocketIsFoundByTheNextWalkAndCountedMissed) {
  const auto events = exporter("1h");
  const auto checked = exporter("1s");
  ASSERT_TRUE(events && checked);
  const std::string gpu0 = node("nvidia0");
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  int fd = -1;
  SteppedChild sender({[&] { fd = ::open(gpu0.c_str(), O_RDWR); },
                       [&] {
                         if (!send_descriptor(pair[0], fd)) ::_exit(1);
                       }});
  SteppedChild receiver({[&] {
    if (!receive_descriptor(pair[1])) ::_exit(1);
  }});
  ::close(pair[0]);
  ::close(pair[1]);

  ASSERT_TRUE(sender.step());
  EXPECT_TRUE(scrape_shows(*events, "0", 1)) << "the sender, from its open";
  ASSERT_TRUE(sender.step());
  ASSERT_TRUE(receiver.step());
  ASSERT_TRUE(holds(receiver.pid(), gpu0));
  sender.end();
  EXPECT_TRUE(scrape_shows(*events, "0", 0)) << "the sender's exit: the events know of no other holder";
  EXPECT_TRUE(holds(receiver.pid(), gpu0));
  EXPECT_TRUE(scrape_shows(*checked, "0", 1)) << "the receiver, found by a walk";
  EXPECT_EQ(counter(*checked, "gpureap_holder_walk_missed_total"), 1);
  EXPECT_EQ(counter(*events, "gpureap_holder_walk_missed_total"), 0) << "it has not walked since";
}

// `gpureap ps --json --watch INTERVAL` in the background, stdout (one frame a line) on a pipe.
class PsWatch {
 public:
  PsWatch(const SimHost& host, const std::string& interval) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) std::abort();
    SpawnOptions options;
    options.env = host.env();
    const PreparedExec exec({gpureap_binary(), "ps", "--json", "--watch", interval}, options);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      exec.exec_in_child(false);
    }
    ::close(out[1]);
    out_ = out[0];
  }
  ~PsWatch() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    ::close(out_);
  }
  PsWatch(const PsWatch&) = delete;
  PsWatch& operator=(const PsWatch&) = delete;

  // The next frame, parsed; null when none came within timeout_ms.
  nlohmann::json next_frame(int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (const auto end = buffer_.find('\n'); end != std::string::npos) {
        const std::string line = buffer_.substr(0, end);
        buffer_.erase(0, end + 1);
        return nlohmann::json::parse(line, nullptr, false);
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{out_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return nullptr;
      char chunk[65536];
      const ssize_t n = ::read(out_, chunk, sizeof chunk);
      if (n <= 0) return nullptr;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
};

// An hour between frames: a frame that shows the new holder came from its events.
TEST_F(HolderEvents, PsWatchShowsANewHolderInAFrameOfItsOwn) {
  PsWatch ps(host_, "1h");
  const nlohmann::json first = ps.next_frame(20000);
  ASSERT_TRUE(first.is_object()) << "the first frame";
  const std::string gpu0 = node("nvidia0");
  SteppedChild holder({[&] { (void)::open(gpu0.c_str(), O_RDWR); }});
  ASSERT_TRUE(holder.step());
  const nlohmann::json next = ps.next_frame(10000);
  ASSERT_TRUE(next.is_object()) << "a frame at the open, not an hour later";
  EXPECT_NE(find_holder(next, holder.pid()), nullptr) << next.dump(2);
  EXPECT_EQ(find_holder(first, holder.pid()), nullptr);
}

// Looks an hour apart: a process that opens a GPU's device file after its process group's
// leader died is an orphan from its open, and watch's rule on it fires at the open's event,
// not at the next look.
TEST_F(HolderEvents, WatchJudgesANewHolderAtItsOpenNotAtItsNextLook) {
  const std::string policy = host_.config_dir() + "/policy.toml";
  std::ofstream(policy) << "interval = \"1h\"\nfull_scan_interval = \"1h\"\n"
                           "[[rule]]\nname = \"orphans\"\ncondition = \"orphan\"\naction = \"log\"\n";
  // A group's leader sh (.1) and its member (.2), which opens GPU 1's device file when told
  // (.go), in a session of their own.
  const std::string file = host_.state_dir() + "/late";
  const auto started = run_command(
      {"/usr/bin/setsid", "-f", "/bin/sh", "-c",
       "exec </dev/null >/dev/null 2>&1; echo $$ > \"$0.1\"; "
       "/bin/sh -c 'while [ ! -e \"$0\" ]; do sleep 0.02; done; exec sleep 1000 3<\"$1\"' \"$0.go\" \"$1\" & "
       "echo $! > \"$0.2\"; wait",
       file, node("nvidia1")});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  pid_t leader = 0, member = 0;
  ASSERT_TRUE(eventually([&] {
    std::ifstream one(file + ".1"), two(file + ".2");
    return static_cast<bool>(one >> leader) && static_cast<bool>(two >> member) && leader > 0 && member > 0;
  }));
  BackgroundWatch watch(host_, policy);
  const auto start = watch.wait_for("start");
  ASSERT_TRUE(start);
  EXPECT_EQ(start->field("driver_reads"), "full-scans") << "an orphan rule needs no driver between full scans";
  ASSERT_EQ(::kill(leader, SIGKILL), 0);
  ASSERT_TRUE(eventually([&] { return !running(leader); }));
  std::ofstream(file + ".go") << "go\n";
  const auto notice = watch.wait_for("notice", {{"rule", "orphans"}, {"pid", std::to_string(member)}}, 10000);
  ::kill(member, SIGKILL);
  ASSERT_TRUE(notice) << "the orphan's rule waited for the next look, an hour away";
  EXPECT_EQ(watch.stop(), 0);
}

// More forks and exits between two scrapes than the connector's buffer holds: the exporter
// reads the events as they come, so none are lost and no walk follows.
TEST_F(HolderEvents, ExportReadsTheEventsBetweenScrapesSoAFloodOfForksLosesNone) {
  const auto events = exporter("1h");
  ASSERT_TRUE(events);
  const double lost = counter(*events, "gpureap_holder_events_lost_total");
  const double walks = counter(*events, "gpureap_holder_walks_total");
  for (int i = 0; i < kForkFlood; ++i) {
    const pid_t child = ::vfork();
    if (child == 0) ::_exit(0);
    ASSERT_GT(child, 0);
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  }
  EXPECT_EQ(counter(*events, "gpureap_holder_events_lost_total"), lost);
  EXPECT_EQ(counter(*events, "gpureap_holder_walks_total"), walks);
}

// A holder's details are kept between scans while its events say nothing changed; its setuid
// and its exec are events: the next frame (made at a marker's open, an hour before the next
// interval) shows its new user, then its new program, not what a scan before kept.
TEST_F(HolderEvents, PsWatchShowsAHoldersNewUserAndProgramAtTheNextFrame) {
  const passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user nobody here";
  const uid_t uid = nobody->pw_uid;
  PsWatch ps(host_, "1h");
  ASSERT_TRUE(ps.next_frame(20000).is_object()) << "the first frame";
  // The next frame that shows `marker` holding a device file, or not (bounded).
  const auto frame_where = [&ps](pid_t marker, bool holding) {
    for (int i = 0; i < 10; ++i) {
      nlohmann::json frame = ps.next_frame(10000);
      if (!frame.is_object()) break;
      if ((find_holder(frame, marker) != nullptr) == holding) return frame;
    }
    return nlohmann::json();
  };
  const std::string gpu0 = node("nvidia0"), gpu1 = node("nvidia1");
  SteppedChild holder({
      [&] { (void)::open(gpu0.c_str(), O_RDWR); },
      [&] {
        if (::setresuid(uid, uid, uid) != 0) ::_exit(126);
      },
      [&] {
        ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
        ::_exit(127);
      },
  });
  // Each marker's open or end changes the set: the frame that shows it.
  const auto marker = [&gpu1] {
    return std::make_unique<SteppedChild>(
        std::vector<SteppedChild::Step>{[&gpu1] { (void)::open(gpu1.c_str(), O_RDONLY); }});
  };
  ASSERT_TRUE(holder.step());  // the open
  auto first_marker = marker();
  ASSERT_TRUE(first_marker->step());
  nlohmann::json frame = frame_where(first_marker->pid(), true);
  ASSERT_NE(find_holder(frame, holder.pid()), nullptr) << frame.dump(2);
  EXPECT_EQ((*find_holder(frame, holder.pid()))["uid"], 0);

  ASSERT_TRUE(holder.step());  // setuid
  const pid_t first = first_marker->pid();
  first_marker->end();
  frame = frame_where(first, false);
  ASSERT_NE(find_holder(frame, holder.pid()), nullptr) << frame.dump(2);
  EXPECT_EQ((*find_holder(frame, holder.pid()))["uid"], uid) << "its user after setuid";

  EXPECT_FALSE(holder.step()) << "an exec never answers";
  ASSERT_TRUE(eventually([&] { return comm_of(holder.pid()) == "sleep"; }));
  auto second_marker = marker();
  ASSERT_TRUE(second_marker->step());
  frame = frame_where(second_marker->pid(), true);
  ASSERT_NE(find_holder(frame, holder.pid()), nullptr) << frame.dump(2);
  EXPECT_EQ((*find_holder(frame, holder.pid()))["command"], "sleep 600") << "its program after exec";
}

// GPUREAP_HOLDER_EVENTS=off: watch walks at every full scan and says so once in its log.
TEST_F(HolderEvents, WatchWithEventsOffSaysOnceThatItWalks) {
  const std::string policy = host_.config_dir() + "/policy.toml";
  std::ofstream(policy) << "interval = \"100ms\"\nfull_scan_interval = \"300ms\"\n"
                           "[[rule]]\nname = \"idle\"\ncondition = \"idle\"\nidle_for = \"1h\"\naction = \"log\"\n";
  BackgroundWatch watch(host_, policy, {}, {{"GPUREAP_HOLDER_EVENTS", "off"}});
  const auto said = watch.wait_for("holder-events-off");
  ASSERT_TRUE(said);
  const auto start = watch.wait_for("start");
  ASSERT_TRUE(start);
  EXPECT_EQ(start->field("driver_reads"), "every-look") << "without events the driver tells of new GPU processes";
  EXPECT_EQ(said->field("why"), "holders found by walking /proc at every scan: GPUREAP_HOLDER_EVENTS=off");
  EXPECT_TRUE(watch.wait_for_count("scan", {}, 4)) << "several full scans";
  EXPECT_EQ(watch.count("holder-events-off"), 1u);
  EXPECT_EQ(watch.stop(), 0);
}

// As a user without CAP_SYS_ADMIN: export and ps --watch walk /proc at every collection, find
// a new GPU process so, and say once why.
TEST(HolderEventsFallback, WithoutTheCapabilityExportAndPsWatchWalkAndSayWhyOnce) {
  if (!running_as_root()) GTEST_SKIP() << "switching to " << kTestUserName << " needs root";
  const passwd* user = test_user();
  ASSERT_NE(user, nullptr);
  SimHost host;
  ExportServer server(host, {"--reconcile", "1h", "--cache", "0", "--no-kernel-log"}, true, user->pw_uid);
  ASSERT_TRUE(server.serving()) << server.stderr_text();
  const Scrape first = server.scrape();
  EXPECT_EQ(first.value("gpureap_holder_events_active"), 0);
  EXPECT_FALSE(first.value("gpureap_holder_walks_total").has_value()) << "no reconciliation: every collection walks";
  auto job = host.start({"--alloc", "0:1GiB"}, user->pw_uid);
  EXPECT_TRUE(scrape_shows(server, "0", 1)) << "found by the next collection's walk";
  const std::string told = "holders found by walking /proc at every scan: fanotify: not permitted (needs CAP_SYS_ADMIN)";
  const std::string err = server.stderr_text();
  EXPECT_NE(err.find(told), std::string::npos) << err;
  EXPECT_EQ(err.find(told), err.rfind(told)) << "said once: " << err;

  SpawnOptions options;
  options.env = host.env();
  options.uid = user->pw_uid;
  const auto ps = run_command({"/usr/bin/timeout", "--preserve-status", "-s", "INT", "1.5",
                               reachable_by_other_users(gpureap_binary()), "ps", "--json", "--watch", "0.2"},
                              options);
  EXPECT_EQ(ps.exit_code, 0) << ps.err;
  EXPECT_GE(std::count(ps.out.begin(), ps.out.end(), '\n'), 3) << "frames";
  EXPECT_EQ(ps.err, "gpureap ps: " + told + "\n");
}

}  // namespace holder_events_test
}  // namespace gpureap::test
