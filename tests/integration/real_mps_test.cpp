// NVIDIA's real MPS control daemon (Debian's nvidia-cuda-mps 535 and 550, fetched by
// scripts/fetch-nvidia-mps.sh): what it creates in its pipe directory, and its real front end
// run the way gpureap runs it (spawn/timed_command.hpp): exec'd by the descriptor of the
// daemon's own executable, with the daemon's user's credentials, never as root for a user's
// daemon; and gpureap's proof of it (its listening socket) and its terminate path. CI runs as
// root with the packages fetched: a skip there fails the run.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "real_mps_daemon.hpp"
#include "sim_harness.hpp"
#include "kill/mps_terminate.hpp"
#include "proc/pid_files.hpp"
#include "proc/pinned_process.hpp"
#include "proc/unix_sockets.hpp"
#include "snapshot/mps_roles.hpp"
#include "spawn/timed_command.hpp"

namespace gpureap {
namespace {

struct Version {
  int major;
  bool pid_file;                      // R550 writes nvidia-cuda-mps-control.pid, R535 none
  const char* server_status_answer;  // `get_server_status` without a PID
};
constexpr Version kVersions[] = {
    {535, false, "Unknown command \"get_server_status\"\n"},
    {550, true, "A server PID is required\n"},
};

class RealMps : public ::testing::TestWithParam<Version> {
 protected:
  void SetUp() override {
    std::string why;
    package_ = test::real_mps_package(GetParam().major, why);
    if (package_.empty()) GTEST_SKIP() << why;
    if (!test::running_as_root()) GTEST_SKIP() << "needs root: the daemons run as root and as the test user";
    char pattern[] = "/tmp/gpureap-real-mps-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ::chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  // One line through the daemon's front end as gpureap runs it.
  TimedRun front_end(const test::RealMpsDaemon& daemon, uid_t uid, gid_t gid, const std::string& line) const {
    const procfs::unique_fd exe(::open(("/proc/" + std::to_string(daemon.pid()) + "/exe").c_str(), O_PATH | O_CLOEXEC));
    TimedCommand command;
    command.argv = {"nvidia-cuda-mps-control"};
    command.program_fd = exe.get();
    command.run_as = Credentials{uid, gid, {gid}};
    command.timeout = std::chrono::seconds(10);
    command.give_input = true;
    command.input = line + "\n";
    command.extra_env = {"CUDA_MPS_PIPE_DIRECTORY=" + daemon.pipe()};
    command.max_output_bytes = 16 * 1024;
    return run_timed_command(command);
  }
  std::string package_;
  std::string dir_;
};

mode_t mode_of(const std::string& path, mode_t* type = nullptr) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 07777 + 1;
  if (type != nullptr) *type = st.st_mode & S_IFMT;
  return st.st_mode & 07777;
}

TEST_P(RealMps, ThePipeDirectoryHoldsWhatThisVersionCreates) {
  test::RealMpsDaemon daemon(package_, dir_ + "/root", 0, 0);
  ASSERT_TRUE(daemon.running()) << daemon.error();
  mode_t type = 0;
  EXPECT_EQ(mode_of(daemon.pipe() + "/control", &type), 0666u);
  EXPECT_EQ(type, static_cast<mode_t>(S_IFSOCK));
  EXPECT_EQ(mode_of(daemon.pipe() + "/control_privileged", &type), 0755u);
  EXPECT_EQ(type, static_cast<mode_t>(S_IFSOCK));
  EXPECT_EQ(mode_of(daemon.pipe() + "/control_lock", &type), 0666u);
  EXPECT_EQ(type, static_cast<mode_t>(S_IFREG));
  mode_of(daemon.pipe() + "/log", &type);
  EXPECT_EQ(type, static_cast<mode_t>(S_IFIFO));
  const std::string pid_file = daemon.pipe() + "/nvidia-cuda-mps-control.pid";
  if (GetParam().pid_file) {
    // Any user may rewrite it: it proves nothing.
    EXPECT_EQ(mode_of(pid_file), 0666u);
    EXPECT_EQ(test::read_text_file(pid_file), std::to_string(daemon.pid()));
  } else {
    EXPECT_FALSE(std::filesystem::exists(pid_file)) << "R" << GetParam().major << " writes no pid file";
  }
  ASSERT_TRUE(daemon.quit());
  // quit removes the pid file and the FIFO and leaves the sockets.
  EXPECT_FALSE(std::filesystem::exists(pid_file));
  EXPECT_FALSE(std::filesystem::exists(daemon.pipe() + "/log"));
  EXPECT_TRUE(std::filesystem::exists(daemon.pipe() + "/control"));
}

TEST_P(RealMps, ItsFrontEndRunAsTheDaemonsUserGivesTheRealReplies) {
  const passwd* user = test::test_user();
  ASSERT_NE(user, nullptr);
  test::RealMpsDaemon daemon(package_, dir_ + "/user", user->pw_uid, user->pw_gid);
  ASSERT_TRUE(daemon.running()) << daemon.error();
  const TimedRun servers = front_end(daemon, user->pw_uid, user->pw_gid, "get_server_list");
  ASSERT_TRUE(servers.ok()) << describe_timed_run(servers, std::chrono::seconds(10)) << ": " << servers.output;
  EXPECT_EQ(servers.output, "");  // no CUDA client, so no server
  EXPECT_EQ(servers.program, daemon.control_program());
  const TimedRun clients = front_end(daemon, user->pw_uid, user->pw_gid, "get_client_list 123");
  EXPECT_TRUE(clients.ok()) << describe_timed_run(clients, std::chrono::seconds(10));
  EXPECT_EQ(clients.output, "Server 123 not found\n");
  const TimedRun status = front_end(daemon, user->pw_uid, user->pw_gid, "get_server_status");
  EXPECT_EQ(status.output, GetParam().server_status_answer);
  // The front end ran as the user: the daemon logged the user's commands (its log line may come
  // after its answer) and is still theirs.
  const std::string control_log = daemon.log() + "/control.log";
  EXPECT_TRUE(test::eventually([&] {
    return test::read_text_file(control_log).find("Cmd:get_client_list 123") != std::string::npos;
  })) << test::read_text_file(control_log);
  EXPECT_TRUE(daemon.running());
}

// Start time of `pid` as /proc says it, or 0.
std::uint64_t start_ticks(pid_t pid) {
  const auto stat = procfs::read_stat("/proc", pid);
  return stat ? stat->start_time_ticks : 0;
}

// The proof gpureap asks of a control daemon, on the real one: root's, holding the socket that
// listens at <pipe>/control, that path naming that socket.
std::optional<std::string> proven_pipe(const test::RealMpsDaemon& daemon, std::string& why) {
  const auto pinned = procfs::PinnedProcess::pin("/proc", daemon.pid(), start_ticks(daemon.pid()), why);
  const auto table = procfs::read_unix_sockets();
  if (!pinned || !table) return std::nullopt;
  return prove_mps_control_daemon(*pinned, *table, why);
}

TEST_P(RealMps, ProvenByItsSocketAndAskedThroughItsOwnFrontEndOnly) {
  test::RealMpsDaemon daemon(package_, dir_ + "/root", 0, 0);
  ASSERT_TRUE(daemon.running()) << daemon.error();
  std::string why;
  const auto pipe = proven_pipe(daemon, why);
  ASSERT_TRUE(pipe) << why;
  EXPECT_EQ(*pipe, daemon.pipe());
  // A terminate for a server the daemon does not list: its own front end answers
  // get_server_list (through links to its sockets in a directory of root's), nothing more.
  const PinTarget self{::getpid(), start_ticks(::getpid())};
  const auto result = terminate_mps_client(MpsControlDaemon{daemon.pid(), start_ticks(daemon.pid()), *pipe}, self, self,
                                           "/proc", std::chrono::seconds(5));
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.detail.find("does not list " + std::to_string(::getpid()) + " among its servers"), std::string::npos)
      << result.detail;
  // The daemon logs a command after it answers, one command at a time: a marker asked after the
  // call is waited for in the log, and every command the call sent is logged before it.
  const TimedRun marker = front_end(daemon, 0, 0, "get_client_list 999");
  EXPECT_TRUE(marker.ok()) << describe_timed_run(marker, std::chrono::seconds(10));
  std::string log;
  EXPECT_TRUE(test::eventually([&] {
    log = test::read_text_file(daemon.log() + "/control.log");
    return log.find("Cmd:get_client_list 999") != std::string::npos;
  })) << log;
  EXPECT_NE(log.find("Cmd:get_server_list"), std::string::npos) << log;
  EXPECT_EQ(log.find("Cmd:terminate_client"), std::string::npos) << log;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/root")) {
    EXPECT_NE(entry.path().filename().string().rfind(".gpureap-mps-", 0), 0u) << entry.path() << " was left behind";
  }
}

// What a user can do in NVIDIA's 0777 pipe directory: put a socket of their own at `control`.
// The daemon is then no longer proven, and nothing is asked of anyone.
TEST_P(RealMps, ASocketSwappedInAtControlUnprovesTheDaemon) {
  test::RealMpsDaemon daemon(package_, dir_ + "/root", 0, 0);
  ASSERT_TRUE(daemon.running()) << daemon.error();
  std::string why;
  const auto pipe = proven_pipe(daemon, why);
  ASSERT_TRUE(pipe) << why;
  const std::string control = daemon.pipe() + "/control";
  ASSERT_EQ(::rename(control.c_str(), (control + ".theirs").c_str()), 0);
  const int impostor = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", control.c_str());
  ASSERT_EQ(::bind(impostor, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(impostor, 4), 0);
  EXPECT_FALSE(proven_pipe(daemon, why));
  EXPECT_NE(why.find("names another file now"), std::string::npos) << why;
  const PinTarget self{::getpid(), start_ticks(::getpid())};
  const auto result = terminate_mps_client(MpsControlDaemon{daemon.pid(), start_ticks(daemon.pid()), *pipe}, self, self,
                                           "/proc", std::chrono::seconds(5));
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.detail.find("no longer proven"), std::string::npos) << result.detail;
  pollfd waiting{impostor, POLLIN, 0};
  EXPECT_EQ(::poll(&waiting, 1, 0), 0) << "the impostor's socket was connected to";
  ::close(impostor);
  ::rename((control + ".theirs").c_str(), control.c_str());
}

INSTANTIATE_TEST_SUITE_P(Debian, RealMps, ::testing::ValuesIn(kVersions),
                         [](const ::testing::TestParamInfo<Version>& version) { return "R" + std::to_string(version.param.major); });

}  // namespace
}  // namespace gpureap
