// A PID freed during the ladder goes to a stranger: the refreeze before SIGKILL must never
// reach it. Each scenario runs in a PID namespace of its own, where
// ns_last_pid places the stranger on the freed PID without racing other tests' forks.
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

// The stranger S (on the freed PID) and its child S1, as the scenario script saw them after
// gpureap finished: "S <pid> <state> <start>" and "S1 <pid> <state> <start>".
struct Seen {
  pid_t pid = 0;
  char state = '?';
  unsigned long long start = 0;
};

Seen seen(const std::string& out, const std::string& tag) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string word;
    Seen s;
    if (words >> word && word == tag && words >> s.pid >> s.state >> s.start) return s;
  }
  return {};
}

// The script's shared tail: wait for the freed PID, put S (and its child S1, in a session of
// its own) on it, wait for gpureap, then describe S and S1.
constexpr const char* kStrangerAndReport = R"SH(
while kill -0 "$freed" 2>/dev/null; do sleep 0.02; done
echo $((freed - 1)) > /proc/sys/kernel/ns_last_pid
setsid /bin/sh -c 'sleep 1000 & wait' &
s=$!
[ "$s" = "$freed" ] || echo "NOREUSE $s $freed"
for i in $(seq 100); do s1=$(cut -d' ' -f1 /proc/$s/task/$s/children 2>/dev/null); [ -n "$s1" ] && break; sleep 0.02; done
wait "$k"; echo "RC $?"
show() { [ -r /proc/$2/stat ] || { echo "$1 $2 gone 0"; return; }; set -- "$1" "$2" $(cat /proc/$2/stat); echo "$1 $2 ${5} ${24}"; }
show S "$s"; show S1 "$s1"
)SH";

struct Scenario {
  CommandResult result;
  std::vector<nlohmann::json> audit;
};

Scenario run_in_own_pid_namespace(const SimHost& host, const std::string& head) {
  const std::string audit = host.state_dir() + "/audit.log";
  SpawnOptions options;
  options.env = host.env();
  Scenario scenario;
  scenario.result = run_command({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "/bin/sh", "-c",
                                 head + kStrangerAndReport, gpureap_binary(), audit},
                                options, 60000);
  scenario.audit = audit_lines(audit);
  return scenario;
}

void expect_stranger_untouched(const Scenario& scenario) {
  const std::string& out = scenario.result.out;
  ASSERT_EQ(out.find("NOREUSE"), std::string::npos) << "the stranger did not get the freed PID: " << out;
  const Seen s = seen(out, "S");
  const Seen s1 = seen(out, "S1");
  ASSERT_GT(s.pid, 1) << out << scenario.result.err;
  ASSERT_GT(s1.pid, 1) << "the stranger had no child: " << out << scenario.result.err;
  EXPECT_EQ(s.state, 'S') << "the stranger is not sleeping (T: stopped, g: gone): " << out;
  EXPECT_EQ(s1.state, 'S') << "the stranger's child is not sleeping (T: stopped, g: gone): " << out;
  for (const auto& line : scenario.audit) {
    const bool names_s = line.value("pid", 0) == s.pid && line.value("start_time_ticks", 0ULL) == s.start;
    const bool names_s1 = line.value("pid", 0) == s1.pid;
    EXPECT_FALSE(names_s || names_s1) << "the audit log names the stranger: " << line.dump();
  }
}

// Tree mode: T ignores SIGTERM, its child C dies of it; C's PID goes to S while the ladder
// waits. The refreeze before SIGKILL walks only from living members, and keeps a child only
// when, read through its pin, it is still the child of the living member it was found under.
TEST(KillPidReuse, AStrangerOnAFinishedChildsPidAndItsChildAreNeverStoppedOrSignalled) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  SimHost host;
  const std::string head = R"SH(
g=$0; audit=$1; export audit
setsid /bin/sh -c 'trap "" TERM; env --default-signal=TERM sleep 1000 & wait; exec sleep 1000' &
t=$!
for i in $(seq 200); do freed=$(cut -d' ' -f1 /proc/$t/task/$t/children 2>/dev/null)
  [ -n "$freed" ] && [ "$(cat /proc/$freed/comm)" = sleep ] && break; sleep 0.02; done
"$g" kill "$t" --yes --json --timeout 2 --no-verify --audit-log "$audit" >/dev/null &
k=$!
)SH";
  const Scenario scenario = run_in_own_pid_namespace(host, head);
  expect_stranger_untouched(scenario);
  EXPECT_NE(scenario.result.out.find("RC 0"), std::string::npos) << scenario.result.out << scenario.result.err;
}

// Group mode: T (a member of L's group G) ignores SIGTERM and, once continued, leaves G for a
// session of its own; the leader L dies of SIGTERM, so G's ID is free and S makes a new group
// G. The refreeze scans a group only while a living member still has it.
TEST(KillPidReuse, AStrangerGroupOnAFinishedGroupsIdIsNeverStoppedOrSignalled) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  SimHost host;
  const std::string head = R"SH(
g=$0; audit=$1; export audit
( setsid /bin/sh -c '/usr/bin/python3 -c "
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGCONT, lambda *a: os.setsid())
print(os.getpid(), flush=True)
while True: time.sleep(1000)
" > "$(dirname "$audit")/t.pid" & wait' & wait ) &
for i in $(seq 200); do t=$(cat "$(dirname "$audit")/t.pid" 2>/dev/null); [ -n "$t" ] && break; sleep 0.02; done
freed=$(cut -d' ' -f5 /proc/$t/stat)
"$g" kill "$t" --group --yes --json --timeout 2 --no-verify --audit-log "$audit" >/dev/null &
k=$!
)SH";
  const Scenario scenario = run_in_own_pid_namespace(host, head);
  expect_stranger_untouched(scenario);
}

}  // namespace
}  // namespace gpureap::test
