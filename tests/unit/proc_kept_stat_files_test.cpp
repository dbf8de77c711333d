// KeptStatFiles against real child processes: a kept file follows its process's CPU time and
// state, and never answers for another process, whether the PID was reused or the caller named
// another start time.
#include <gtest/gtest.h>

#include <cstdlib>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/kept_stat_files.hpp"
#include "proc/pid_files.hpp"

namespace gpureap {
namespace {

// A child that spins (or sleeps) until killed; killed and reaped by reap() or the guard.
class Spinner {
 public:
  explicit Spinner(bool spin) {
    pid_ = ::fork();
    if (pid_ == 0) {
      volatile unsigned long spins = 0;
      while (spin) spins = spins + 1;
      ::pause();
      ::_exit(0);
    }
  }
  ~Spinner() { reap(); }
  Spinner(const Spinner&) = delete;
  Spinner& operator=(const Spinner&) = delete;
  pid_t pid() const { return pid_; }
  void reap() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

std::uint64_t cpu_ticks(const StatFields& stat) { return stat.utime_ticks + stat.stime_ticks; }

TEST(KeptStatFiles, AKeptFileFollowsItsProcessUntilItIsReaped) {
  Spinner child(true);
  const pid_t pid = child.pid();
  const auto first_by_path = procfs::read_stat("/proc", pid);
  ASSERT_TRUE(first_by_path);
  procfs::KeptStatFiles stats("/proc");
  const auto first = stats.read(pid, first_by_path->start_time_ticks);
  ASSERT_TRUE(first);
  EXPECT_EQ(stats.kept(), 1u);
  // The spin shows in the same kept file, read again: no stale copy.
  bool grew = false;
  for (int i = 0; i < 200 && !grew; ++i) {
    ::usleep(10'000);
    const auto again = stats.read(pid, first_by_path->start_time_ticks);
    ASSERT_TRUE(again);
    grew = cpu_ticks(*again) > cpu_ticks(*first);
  }
  EXPECT_TRUE(grew) << "its CPU time as the kernel counts it now";
  EXPECT_EQ(stats.kept(), 1u) << "read again through the same file";

  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);  // reaped: its PID may name anyone from now on
  child.reap();
  EXPECT_FALSE(stats.read(pid, first_by_path->start_time_ticks));
  EXPECT_EQ(stats.kept(), 0u);
}

TEST(KeptStatFiles, AnotherStartTimeIsAnotherProcess) {
  Spinner child(false);
  const auto by_path = procfs::read_stat("/proc", child.pid());
  ASSERT_TRUE(by_path);
  procfs::KeptStatFiles stats("/proc");
  EXPECT_FALSE(stats.read(child.pid(), by_path->start_time_ticks + 1)) << "the PID's earlier owner";
  EXPECT_EQ(stats.kept(), 0u);
  ASSERT_TRUE(stats.read(child.pid(), by_path->start_time_ticks));
  EXPECT_FALSE(stats.read(child.pid(), by_path->start_time_ticks + 1));
  EXPECT_EQ(stats.kept(), 0u) << "the file of the one asked about before is closed";
}

TEST(KeptStatFiles, AZombieIsReadAsAZombieAndFilesNotReadAreClosed) {
  Spinner zombie(false), other(false);
  const auto zombie_stat = procfs::read_stat("/proc", zombie.pid());
  const auto other_stat = procfs::read_stat("/proc", other.pid());
  ASSERT_TRUE(zombie_stat && other_stat);
  procfs::KeptStatFiles stats("/proc", 1);
  ASSERT_TRUE(stats.read(zombie.pid(), zombie_stat->start_time_ticks));
  ASSERT_TRUE(stats.read(other.pid(), other_stat->start_time_ticks)) << "read by path beyond max_open";
  EXPECT_EQ(stats.kept(), 1u);

  ::kill(zombie.pid(), SIGKILL);  // not reaped
  std::optional<StatFields> seen;
  for (int i = 0; i < 500; ++i) {
    seen = stats.read(zombie.pid(), zombie_stat->start_time_ticks);
    if (!seen || seen->state == 'Z') break;
    ::usleep(2'000);
  }
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->state, 'Z');

  stats.close_unread();  // both were read since: kept
  EXPECT_EQ(stats.kept(), 1u);
  stats.close_unread();  // none read since
  EXPECT_EQ(stats.kept(), 0u);
}

}  // namespace
}  // namespace gpureap
