// The idle rule over time (RuleBook): a quiet spell starts at the reading before the first
// quiet window and must last idle_for; a window ends only where the candidate's CPU was read
// again, so the looks between two readings (watch reads a kept holder's CPU with the driver,
// watch/observation.hpp) neither start nor end a spell; the re-check before acting allows the
// CPU of the time since the reading the look judged by.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "watch/policy.hpp"
#include "watch/rule_book.hpp"

namespace gpureap {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::shared_ptr<const Policy> idle_policy(const std::string& idle_for) {
  std::string error;
  auto policy = parse_policy("[[rule]]\nname = \"idle\"\ncondition = \"idle\"\nidle_for = \"" + idle_for +
                                 "\"\naction = \"log\"\n",
                             "policy.toml", error);
  EXPECT_TRUE(policy) << error;
  return std::make_shared<const Policy>(policy.value_or(Policy{}));
}

// A GPU process with an idle GPU, its CPU time as read at `read_at`.
Candidate process(double cpu_seconds, Clock::time_point read_at) {
  Candidate c;
  c.pid = 4242;
  c.start_ticks = 7;
  c.kind = CandidateKind::GpuProcess;
  c.uid = 1000;
  c.sm_util_percent = 0;
  c.cpu_seconds = cpu_seconds;
  c.cpu_read_at = read_at;
  return c;
}

Look look_at(Clock::time_point at, const Candidate& c) {
  Look look;
  look.at = at;
  look.driver_readable = true;
  look.candidates.push_back(c);
  return look;
}

bool noticed(const std::vector<Decision>& decisions) {
  return std::any_of(decisions.begin(), decisions.end(), [](const Decision& d) { return d.kind == DecisionKind::Notice; });
}

TEST(WatchRuleBook, AQuietSpellOfIdleForIsNoticedAndABusyReadingRestartsIt) {
  RuleBook book;
  book.set_policy(idle_policy("10s"));
  const Clock::time_point t0 = Clock::now();
  double cpu = 3.0;
  // Read every 2 s; 10 ms of CPU a window is 0.5 % of a core, under the default 1 %.
  for (int s = 0; s <= 8; s += 2) {
    const auto at = t0 + std::chrono::seconds(s);
    EXPECT_FALSE(noticed(book.evaluate(look_at(at, process(cpu, at))))) << "at " << s << " s";
    cpu += 0.01;
  }
  EXPECT_TRUE(noticed(book.evaluate(look_at(t0 + 10s, process(cpu, t0 + 10s))))) << "quiet since the first reading";

  RuleBook busy_once;
  busy_once.set_policy(idle_policy("10s"));
  cpu = 3.0;
  for (int s = 0; s <= 20; s += 2) {
    const auto at = t0 + std::chrono::seconds(s);
    cpu += s == 6 ? 0.5 : 0.0;  // a quarter of a core between 4 s and 6 s
    const bool was_noticed = noticed(busy_once.evaluate(look_at(at, process(cpu, at))));
    EXPECT_EQ(was_noticed, s == 16) << "at " << s << " s: the spell starts again at the 6 s reading";
  }
}

// The CPU is read at 0 s and 10 s only, and the process used half a core in between: the
// looks at 1..9 s carry the 0 s reading and must not be taken for quiet windows (a 5 s
// idle_for would otherwise be met at 5 s by a process that never stopped working).
TEST(WatchRuleBook, LooksBetweenReadingsOfItsCpuBringNoWindow) {
  RuleBook book;
  book.set_policy(idle_policy("5s"));
  const Clock::time_point t0 = Clock::now();
  const Candidate first = process(1.0, t0);
  for (int s = 0; s < 10; ++s) {
    EXPECT_FALSE(noticed(book.evaluate(look_at(t0 + std::chrono::seconds(s), first)))) << "at " << s << " s";
  }
  EXPECT_FALSE(noticed(book.evaluate(look_at(t0 + 10s, process(6.0, t0 + 10s)))));
  // Quiet from the 10 s reading on: the 15 s reading ends a quiet spell of 5 s.
  EXPECT_TRUE(noticed(book.evaluate(look_at(t0 + 15s, process(6.0, t0 + 15s)))));
  // A look between readings neither clears the notice nor makes another.
  EXPECT_TRUE(book.evaluate(look_at(t0 + 17s, process(6.0, t0 + 15s))).empty());
}

TEST(WatchRuleBook, TheRecheckAllowsTheCpuOfTheTimeSinceTheReading) {
  RuleBook book;
  book.set_policy(idle_policy("10s"));
  const Rule& rule = book.policy().rules.front();
  const Clock::time_point t0 = Clock::now();
  const Candidate seen = process(2.0, t0);
  EXPECT_TRUE(book.still_holds(rule, seen, process(2.05, t0 + 10s), 10.0, {})) << "0.5 % of a core over 10 s";
  EXPECT_FALSE(book.still_holds(rule, seen, process(2.05, t0 + 1s), 1.0, {})) << "5 % over 1 s";
  EXPECT_FALSE(book.still_holds(rule, seen, process(3.0, t0 + 10s), 10.0, {})) << "10 % over 10 s";
}

}  // namespace
}  // namespace gpureap
