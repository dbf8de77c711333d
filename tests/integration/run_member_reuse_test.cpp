// A member of `gpureap run`'s job ends, and another user's process takes its PID between the
// moment the PID is read (a children file, the job's cgroup.procs) and the moment it is pinned.
// The stranger and its child must survive, and neither the report nor the audit log
// may name them. Each scenario runs in a PID namespace of its own: its init (N) places the
// stranger on the freed PID through ns_last_pid without racing other tests' forks, while the
// guard (G, N's child) waits inside MembershipSettings::after_read, the seam between the read
// and the pin.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cgroup_support.hpp"
#include "job/job_cgroup.hpp"
#include "job/job_ending.hpp"
#include "job/job_members.hpp"
#include "audit/audit_log.hpp"
#include "kill_support.hpp"
#include "signals_settled.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {
namespace member_reuse {  // one unity batch holds other tests' helpers of the same names

enum class Scenario {
  EndInTree,     // end_job; the member is gpureap's child, read from its children file
  EndInCgroup,   // end_job; the member is in the job's cgroup only, read from cgroup.procs
  ForwardUnproven,  // a forwarded signal while no member can be pinned (no descriptors left)
};

void say(int out, const std::string& line) {
  const std::string text = line + "\n";
  (void)!write(out, text.data(), text.size());
}

[[noreturn]] void fail(int out, const std::string& what) {
  say(out, "ERR " + what + ": " + std::strerror(errno));
  _exit(1);
}

bool write_file(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

std::string read_word(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  in >> word;
  return word;
}

// Waits (2 s at most) until pid has exec'd `comm`.
bool wait_comm(pid_t pid, const std::string& comm) {
  for (int i = 0; i < 200; ++i) {
    if (read_word("/proc/" + std::to_string(pid) + "/comm") == comm) return true;
    usleep(10000);
  }
  return false;
}

// `sleep 1000` in process group `group` (0: a group of its own), in the cgroup whose
// cgroup.procs is `procs` when one is given.
pid_t spawn_sleep(pid_t group, const std::string& procs) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, group);
    if (!procs.empty() && !write_file(procs, "0")) _exit(3);
    execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, group == 0 ? pid : group);
  return pid;
}

// The stranger S: another user's `sh -c 'sleep 1000 & wait'` (its child S1 is the sleep), in
// process group `group`, or in a session of its own when group is 0.
pid_t spawn_stranger(pid_t group, uid_t uid, gid_t gid) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (group > 0 ? setpgid(0, group) != 0 : setsid() < 0) _exit(3);
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(4);
    execl("/bin/sh", "sh", "-c", "sleep 1000 & wait", static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

pid_t first_child(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    const std::string word = read_word("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    if (!word.empty()) return static_cast<pid_t>(std::stol(word));
    usleep(10000);
  }
  return 0;
}

char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close_paren = all.rfind(')');
  return close_paren == std::string::npos || close_paren + 2 >= all.size() ? 'g' : all[close_paren + 2];
}

struct Setup {
  Scenario scenario;
  uid_t uid;
  gid_t gid;
  std::string own_cgroup;  // EndInCgroup: G moves here first, so that its job cgroup's name is its own
  std::string audit_path;
  int out;                 // lines for the test
};

// G: starts the job (leader P and member M), then ends it or forwards a signal to it; when the
// read that names M is made, M is ended and N is asked to put the stranger on its PID.
[[noreturn]] void guard(const Setup& setup, int request, int reply) {
  const int out = setup.out;
  std::optional<job::JobCgroup> cgroup;
  std::string procs;
  if (setup.scenario == Scenario::EndInCgroup) {
    if (!write_file(setup.own_cgroup + "/cgroup.procs", "0")) fail(out, "cannot enter " + setup.own_cgroup);
    std::string why;
    if (auto made = job::JobCgroup::create("/proc", &why, "/nonexistent-systemd-dir")) cgroup.emplace(std::move(*made));
    if (!cgroup) {
      say(out, "SKIP " + why);
      _exit(0);
    }
    procs = cgroup->path() + "/cgroup.procs";
  }
  const pid_t leader = spawn_sleep(0, procs);
  pid_t member = 0;
  if (setup.scenario == Scenario::EndInCgroup) {
    // M in the cgroup but outside G's tree: its parent H exits, and N (PID 1) inherits it.
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) fail(out, "pipe");
    const pid_t helper = fork();
    if (helper == 0) {
      if (!write_file(procs, "0")) _exit(3);
      const pid_t m = spawn_sleep(leader, "");
      (void)!write(pipe_fds[1], &m, sizeof m);
      _exit(0);
    }
    waitpid(helper, nullptr, 0);
    if (read(pipe_fds[0], &member, sizeof member) != sizeof member) fail(out, "no member from the helper");
  } else {
    member = spawn_sleep(leader, "");
  }
  if (!wait_comm(leader, "sleep") || !wait_comm(member, "sleep")) fail(out, "the job did not start");
  say(out, "MEMBER " + std::to_string(member) + " LEADER " + std::to_string(leader));

  job::MembershipSettings membership;
  membership.self = getpid();
  membership.cgroup = cgroup ? &*cgroup : nullptr;
  bool replaced = false;
  membership.after_read = [&](const std::vector<pid_t>& read_pids) {
    if (replaced || std::find(read_pids.begin(), read_pids.end(), member) == read_pids.end()) return;
    replaced = true;
    kill(member, SIGKILL);
    waitpid(member, nullptr, 0);  // ECHILD where it is N's: N reaps it
    pid_t strangers[2] = {0, 0};
    // ForwardUnproven: the stranger joins the job's group (same session), as any process may.
    const pid_t asked[2] = {member, setup.scenario == Scenario::ForwardUnproven ? leader : 0};
    if (write(request, asked, sizeof asked) != sizeof asked ||
        read(reply, strangers, sizeof strangers) != sizeof strangers) {
      fail(out, "no stranger from N");
    }
  };

  if (setup.scenario == Scenario::ForwardUnproven) {
    // No descriptor left for pins: every member is listed unproven.
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);
    std::size_t open_now = 0;
    for (int fd = 0; fd < 1024; ++fd) open_now += fcntl(fd, F_GETFD) != -1 ? 1 : 0;
    const rlimit low{static_cast<rlim_t>(open_now + 8), limit.rlim_max};
    setrlimit(RLIMIT_NOFILE, &low);
    const std::vector<pid_t> signalled = job::signal_group_members(membership, leader, SIGTERM);
    setrlimit(RLIMIT_NOFILE, &limit);
    std::string line = "SIGNALLED";
    for (pid_t pid : signalled) line += " " + std::to_string(pid);
    say(out, line);
  } else {
    std::string error;
    auto audit = AuditLog::open(setup.audit_path, Requester::current(), error);
    if (!audit) fail(out, "audit log: " + error);
    job::EndingSettings ending;
    ending.kill_timeout = std::chrono::milliseconds(1500);
    ending.verify_timeout = std::chrono::milliseconds(0);
    ending.audit = &*audit;
    ending.membership = membership;
    ending.reap = [] {
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
    };
    job::RunReport report;
    job::end_job(ending, report);
    std::string line = "ENDED";
    for (const auto& target : report.ended) line += " " + std::to_string(target.pid);
    for (const auto& evidence : report.evidence) line += " " + std::to_string(evidence.pid);
    say(out, line);
    if (cgroup) cgroup->remove();
  }
  say(out, replaced ? "REPLACED" : "NOT-REPLACED");
  _exit(0);
}

// N, PID 1 of the namespace: runs G, and when G asks, puts the stranger on the freed PID.
[[noreturn]] void namespace_init(const Setup& setup) {
  const int out = setup.out;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail(out, "mount --make-rprivate /");
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) fail(out, "mount proc");
  int request[2];
  int reply[2];
  if (pipe2(request, O_CLOEXEC) != 0 || pipe2(reply, O_CLOEXEC) != 0) fail(out, "pipe");
  const pid_t g = fork();
  if (g == 0) guard(setup, request[1], reply[0]);
  close(request[1]);
  close(reply[0]);
  pid_t asked[2] = {0, 0};  // the freed PID; the group the stranger joins (0: none)
  pid_t& freed = asked[0];
  pid_t stranger = 0;
  pid_t stranger_child = 0;
  if (read(request[0], asked, sizeof asked) == sizeof asked) {
    for (int i = 0; i < 300 && access(("/proc/" + std::to_string(freed)).c_str(), F_OK) == 0; ++i) {
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      usleep(10000);
    }
    if (!write_file("/proc/sys/kernel/ns_last_pid", std::to_string(freed - 1))) fail(out, "ns_last_pid");
    stranger = spawn_stranger(asked[1], setup.uid, setup.gid);
    stranger_child = first_child(stranger);
    pid_t both[2] = {stranger, stranger_child};
    (void)!write(reply[1], both, sizeof both);
  }
  waitpid(g, nullptr, 0);
  // Whatever G sent them has landed (an ended one is a zombie: N does not reap it).
  if (stranger > 0 && !(signals_settled(stranger) && (stranger_child <= 0 || signals_settled(stranger_child)))) {
    fail(out, "the stranger's signals never settled");
  }
  say(out, "S " + std::to_string(stranger) + " " + state_of(stranger));
  say(out, "S1 " + std::to_string(stranger_child) + " " + state_of(stranger_child));
  say(out, stranger == freed ? "REUSED" : "NOREUSE " + std::to_string(stranger) + " " + std::to_string(freed));
  _exit(0);  // the namespace ends with its init: whatever is left in it is killed
}

struct Seen {
  std::string out;
  std::vector<nlohmann::json> audit;
  std::map<std::string, std::vector<std::string>> lines;  // first word → the rest
};

Seen run_scenario(Scenario scenario, const std::string& own_cgroup = "") {
  Seen seen;
  const passwd* user = test_user();
  if (user == nullptr) {
    seen.out = "SKIP no test user";
    return seen;
  }
  SimHost host;
  Setup setup{scenario, user->pw_uid, user->pw_gid, own_cgroup, host.state_dir() + "/audit.log", -1};
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  setup.out = out[1];
  const pid_t outer = fork();
  if (outer == 0) {
    if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) fail(setup.out, "unshare");
    const pid_t init = fork();
    if (init == 0) namespace_init(setup);
    int status = 0;
    waitpid(init, &status, 0);
    _exit(0);
  }
  close(out[1]);
  char chunk[4096];
  for (ssize_t n; (n = read(out[0], chunk, sizeof chunk)) > 0;) seen.out.append(chunk, static_cast<std::size_t>(n));
  close(out[0]);
  waitpid(outer, nullptr, 0);
  std::istringstream lines(seen.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    std::vector<std::string> rest;
    for (std::string w; words >> w;) rest.push_back(w);
    seen.lines.emplace(first, rest);
  }
  seen.audit = audit_lines(setup.audit_path);
  return seen;
}

// The stranger S (on the member's PID) and its child S1 still sleep, and nothing names them.
void expect_strangers_untouched(const Seen& seen, const std::vector<std::string>& naming) {
  const auto& out = seen.out;
  ASSERT_EQ(seen.lines.count("ERR"), 0u) << out;
  ASSERT_EQ(seen.lines.count("REUSED"), 1u) << "the stranger did not get the member's PID: " << out;
  ASSERT_EQ(seen.lines.count("REPLACED"), 1u) << "the seam never saw the member's PID read: " << out;
  const auto& s = seen.lines.at("S");
  const auto& s1 = seen.lines.at("S1");
  ASSERT_EQ(s.size(), 2u) << out;
  ASSERT_EQ(s1.size(), 2u) << out;
  EXPECT_TRUE(s[1] == "S" || s[1] == "R") << "the stranger is not alive (T: stopped, Z or g: gone): " << out;
  EXPECT_TRUE(s1[1] == "S" || s1[1] == "R") << "the stranger's child is not alive (T: stopped, Z or g: gone): " << out;
  for (const auto& pid : naming) {
    EXPECT_NE(pid, s[0]) << "the stranger is named: " << out;
    EXPECT_NE(pid, s1[0]) << "the stranger's child is named: " << out;
  }
  for (const auto& line : seen.audit) {
    const std::string pid = std::to_string(line.value("pid", 0));
    EXPECT_TRUE(pid != s[0] && pid != s1[0]) << "the audit log names the stranger: " << line.dump();
  }
}

void expect_job_ended_without_strangers(const Seen& seen) {
  ASSERT_EQ(seen.lines.count("ENDED"), 1u) << seen.out;
  const auto& ended = seen.lines.at("ENDED");
  const auto& leader = seen.lines.at("MEMBER").at(2);
  // The rest of the job was ended through the same listing, so the seam was on the real path.
  EXPECT_NE(std::find(ended.begin(), ended.end(), leader), ended.end()) << "the job's leader was not ended: " << seen.out;
  EXPECT_FALSE(seen.audit.empty()) << "nothing was audited: " << seen.out;
  expect_strangers_untouched(seen, ended);
}

TEST(RunMemberReuse, AStrangerOnAChildsPidBetweenTheReadAndThePinIsNeverEndedOrNamed) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  const Seen seen = run_scenario(Scenario::EndInTree);
  if (seen.lines.count("SKIP")) GTEST_SKIP() << seen.out;
  expect_job_ended_without_strangers(seen);
}

TEST(RunMemberReuse, AStrangerOnACgroupMembersPidBetweenTheReadAndThePinIsNeverEndedOrNamed) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  OwnCgroup own("member-reuse");
  if (!own.skip_reason().empty()) GTEST_SKIP() << own.skip_reason();
  const Seen seen = run_scenario(Scenario::EndInCgroup, own.path());
  if (seen.lines.count("SKIP")) GTEST_SKIP() << seen.out;
  expect_job_ended_without_strangers(seen);
}

// No descriptor is left to pin with: the members are listed unproven, the stranger among them
// (it joined the job's process group). run's forwarding skips them as the ladder does.
TEST(RunMemberReuse, AForwardedSignalSkipsMembersNotProvenThroughAPin) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  const Seen seen = run_scenario(Scenario::ForwardUnproven);
  if (seen.lines.count("SKIP")) GTEST_SKIP() << seen.out;
  ASSERT_EQ(seen.lines.count("SIGNALLED"), 1u) << seen.out;
  expect_strangers_untouched(seen, seen.lines.at("SIGNALLED"));
}

}  // namespace member_reuse
}  // namespace
}  // namespace gpureap::test
