// PidRef against real processes: pinning, signalling through the pidfd, exit detection, and
// PID reuse inside a PID namespace of our own.
#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kill/escalation.hpp"
#include "kill/pid_ref.hpp"
#include "kill_test_support.hpp"

namespace gpureap {
namespace {

using namespace killtest;

TEST(PidRef, PinsALiveProcessAndSignalsItThroughThePidfd) {
  const pid_t pid = spawn([](int fd) {
    ready(fd);
    pause_forever();
  });
  ASSERT_GT(pid, 0);
  PinResult pinned = PidRef::pin(pid, start_ticks(pid));
  ASSERT_EQ(pinned.status, PinStatus::Ok);
  ASSERT_TRUE(pinned.ref.valid());
  EXPECT_EQ(pinned.ref.pid(), pid);
  EXPECT_EQ(pinned.ref.start_time_ticks(), start_ticks(pid));
  EXPECT_TRUE(::fcntl(pinned.ref.fd(), F_GETFD) & FD_CLOEXEC);
  EXPECT_FALSE(pinned.ref.has_exited());

  EXPECT_EQ(pinned.ref.send_signal(SIGTERM), 0);
  const int status = reap(pid, false);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_TRUE(pinned.ref.has_exited());
  EXPECT_EQ(pinned.ref.send_signal(0), ESRCH);
}

TEST(PidRef, ExitIsVisibleBeforeTheZombieIsReaped) {
  const pid_t pid = spawn([](int fd) {
    ready(fd);
    ::usleep(20000);
    ::_exit(0);
  });
  ASSERT_GT(pid, 0);
  PidRef ref = pin_or_die(pid);
  ASSERT_TRUE(ref.valid());
  ASSERT_TRUE(wait_for_state(pid, 'Z'));
  EXPECT_TRUE(ref.has_exited());
  reap(pid);
}

TEST(PidRef, AnotherStartTimeIsIdentityChangedAndKeepsNoFd) {
  const pid_t pid = spawn([](int fd) {
    ready(fd);
    pause_forever();
  });
  ASSERT_GT(pid, 0);
  PinResult pinned = PidRef::pin(pid, start_ticks(pid) + 1);
  EXPECT_EQ(pinned.status, PinStatus::IdentityChanged);
  EXPECT_FALSE(pinned.ref.valid());
  EXPECT_TRUE(alive(pid));
  reap(pid);
}

TEST(PidRef, ReapedProcessIsGone) {
  const pid_t pid = spawn([](int fd) { ready(fd); });
  ASSERT_GT(pid, 0);
  const std::uint64_t start = start_ticks(pid);
  reap(pid, false);
  PinResult pinned = PidRef::pin(pid, start);
  // The PID could in theory be reused already; then the start time tells.
  EXPECT_TRUE(pinned.status == PinStatus::Gone || pinned.status == PinStatus::IdentityChanged);
  EXPECT_FALSE(pinned.ref.valid());
}

TEST(PidRef, RejectsNonPositivePids) {
  EXPECT_EQ(PidRef::pin(0, 0).status, PinStatus::Error);
  EXPECT_EQ(PidRef::pin(-5, 0).status, PinStatus::Error);
  PidRef empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_EQ(empty.send_signal(SIGTERM), EBADF);
}

TEST(PidRef, MovesOwnership) {
  const pid_t pid = spawn([](int fd) {
    ready(fd);
    pause_forever();
  });
  ASSERT_GT(pid, 0);
  PidRef a = pin_or_die(pid);
  const int fd = a.fd();
  PidRef b = std::move(a);
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(b.fd(), fd);
  EXPECT_EQ(b.pid(), pid);
  reap(pid);
}

// --- PID reuse ------------------------------------------------------------------------------
// Runs inside a fresh PID namespace as its init (PID 1), with a procfs of that namespace
// mounted at proc_dir: pins a child, lets it exit and reaps it, sets ns_last_pid so that the
// next child gets the same PID, and checks that the old pin cannot reach the newcomer.
// Writes "key=value" lines to out_fd.
[[noreturn]] void pid_reuse_scenario(int out_fd, const std::string& proc_dir) {
  std::ostringstream out;
  auto finish = [&](int code) {
    const std::string text = out.str();
    (void)!::write(out_fd, text.data(), text.size());
    ::umount2(proc_dir.c_str(), MNT_DETACH);
    ::_exit(code);
  };
  if (::mount("proc", proc_dir.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    out << "skip=mount proc in the new PID namespace failed: " << std::strerror(errno) << "\n";
    finish(0);
  }
  int gate[2];
  if (::pipe(gate) != 0) finish(1);
  const pid_t first = ::fork();
  if (first == 0) {
    ::close(gate[1]);
    char byte;
    (void)!::read(gate[0], &byte, 1);
    ::_exit(0);
  }
  ::close(gate[0]);
  const auto first_stat = procfs::read_stat(proc_dir, first);
  const std::uint64_t first_start = first_stat ? first_stat->start_time_ticks : 0;
  PinResult old_pin = PidRef::pin(first, first_start, proc_dir);
  out << "first_pid=" << first << "\nfirst_pin=" << static_cast<int>(old_pin.status) << "\n";
  ::close(gate[1]);
  int status = 0;
  ::waitpid(first, &status, 0);
  ::usleep(50000);  // start times count clock ticks (10 ms): let a few pass
  {
    std::ofstream last("/proc/sys/kernel/ns_last_pid");
    last << (first - 1);
    last.flush();
    if (!last) {
      out << "skip=writing /proc/sys/kernel/ns_last_pid failed\n";
      finish(0);
    }
  }
  const pid_t second = ::fork();
  if (second == 0) {
    for (;;) ::pause();  // default SIGTERM action: any signal reaching it would end it
  }
  out << "second_pid=" << second << "\n";
  out << "repin=" << static_cast<int>(PidRef::pin(first, first_start, proc_dir).status) << "\n";
  out << "old_send=" << (old_pin.ref.valid() ? old_pin.ref.send_signal(SIGTERM) : -1) << "\n";
  out << "old_exited=" << old_pin.ref.has_exited() << "\n";

  EscalationOptions options;
  options.proc_root = proc_dir;
  options.timeout = std::chrono::milliseconds(50);
  options.kill_grace = std::chrono::milliseconds(50);
  std::vector<EscalationTarget> targets(1);
  targets[0].ref = std::move(old_pin.ref);
  int audited = 0;
  const auto results = run_escalation(std::move(targets), options, [&](const SignalEvent&) { ++audited; });
  out << "engine=" << kill_outcome_name(results.at(0).outcome) << "\nengine_signals=" << results[0].signals.size()
      << "\naudited=" << audited << "\n";
  (void)test::signals_settled(second);  // what the engine sent it has landed
  out << "second_alive=" << (::waitpid(second, &status, WNOHANG) == 0) << "\n";
  ::kill(second, SIGKILL);
  ::waitpid(second, &status, 0);
  finish(0);
  ::_exit(0);  // finish() does not return
}

std::string value_of(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  }
  return "<missing>";
}

TEST(PidRef, PidReusedInAPidNamespaceIsNeverSignalled) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: unshare(CLONE_NEWPID) and ns_last_pid";
  char dir_template[] = "/tmp/gpureap-pidns-proc-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string proc_dir = dir_template;
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t helper = ::fork();
  ASSERT_GE(helper, 0);
  if (helper == 0) {
    ::close(out[0]);
    if (::unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) {
      const std::string text = std::string("skip=unshare(CLONE_NEWPID|CLONE_NEWNS): ") + std::strerror(errno) + "\n";
      (void)!::write(out[1], text.data(), text.size());
      ::_exit(0);
    }
    ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr);  // our proc mount stays ours
    const pid_t init = ::fork();  // PID 1 of the new namespace
    if (init == 0) pid_reuse_scenario(out[1], proc_dir);
    int status = 0;
    ::waitpid(init, &status, 0);
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 2);
  }
  ::close(out[1]);
  std::string text;
  char buffer[512];
  for (ssize_t got; (got = ::read(out[0], buffer, sizeof buffer)) != 0;) {
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    text.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(helper, &status, 0);
  ::rmdir(proc_dir.c_str());
  if (value_of(text, "skip") != "<missing>") GTEST_SKIP() << value_of(text, "skip");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;

  ASSERT_EQ(value_of(text, "first_pin"), std::to_string(static_cast<int>(PinStatus::Ok))) << text;
  ASSERT_EQ(value_of(text, "second_pid"), value_of(text, "first_pid")) << "the PID was not reused:\n" << text;
  EXPECT_EQ(value_of(text, "repin"), std::to_string(static_cast<int>(PinStatus::IdentityChanged))) << text;
  EXPECT_EQ(value_of(text, "old_send"), std::to_string(ESRCH)) << text;
  EXPECT_EQ(value_of(text, "old_exited"), "1") << text;
  EXPECT_EQ(value_of(text, "engine"), "identity-changed") << text;
  EXPECT_EQ(value_of(text, "engine_signals"), "0") << text;
  EXPECT_EQ(value_of(text, "audited"), "0") << text;
  EXPECT_EQ(value_of(text, "second_alive"), "1") << text;
}

}  // namespace
}  // namespace gpureap
