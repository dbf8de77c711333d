// The one walk up a process tree (proc/ancestry.hpp), over parents given by a map.
#include "proc/ancestry.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <vector>

namespace gpureap {
namespace {

using Pids = std::vector<pid_t>;

struct Parents {
  std::map<pid_t, pid_t> of;
  mutable Pids asked;
  std::optional<pid_t> operator()(pid_t pid) const {
    asked.push_back(pid);
    const auto it = of.find(pid);
    if (it == of.end()) return std::nullopt;
    return it->second;
  }
};

TEST(Ancestry, RunsUpToPidOneAndAsksForEveryPidOfTheChain) {
  const Parents parents{{{30, 20}, {20, 10}, {10, 1}, {1, 0}}, {}};
  EXPECT_EQ(ancestry_walk(30, parents), (Pids{30, 20, 10, 1}));
  EXPECT_EQ(parents.asked, (Pids{30, 20, 10, 1})) << "a scan reads each PID it walks through";
}

TEST(Ancestry, EndsWithTheFirstUnknownPid) {
  EXPECT_EQ(ancestry_walk(30, Parents{{{30, 20}, {20, 15}}, {}}), (Pids{30, 20, 15}));
  EXPECT_EQ(ancestry_walk(99, Parents{{}, {}}), (Pids{99}));
}

TEST(Ancestry, EndsAtAParentOfZero) {
  // PID 1 of a namespace whose /proc shows no parent, or a kernel thread's kthreadd (2).
  EXPECT_EQ(ancestry_walk(5, Parents{{{5, 2}, {2, 0}}, {}}), (Pids{5, 2}));
}

TEST(Ancestry, APpidCycleEndsAtTheBound) {
  // Stat files read at different moments: 40's parent is 41, and 41's parent 40.
  const Parents parents{{{40, 41}, {41, 40}}, {}};
  const Pids chain = ancestry_walk(40, parents);
  EXPECT_EQ(chain.size(), kAncestryBound);
  EXPECT_EQ(parents.asked.size(), kAncestryBound);
  EXPECT_EQ(chain[0], 40);
  EXPECT_EQ(chain[1], 41);
  EXPECT_EQ(chain[2], 40);
}

}  // namespace
}  // namespace gpureap
