// exit_sentinels over the fixture snapshot (fixture_snapshot.hpp): the processes whose end
// makes an orphan or a zombie of a GPU process, which watch's quick looks read one stat of.
#include <algorithm>

#include <gtest/gtest.h>

#include "fixture_snapshot.hpp"
#include "watch/exit_sentinels.hpp"

namespace gpureap {
namespace {

std::vector<pid_t> pids_of(const std::vector<ExitSentinel>& sentinels) {
  std::vector<pid_t> pids;
  for (const auto& [pid, start_ticks] : sentinels) pids.push_back(pid);
  return pids;
}

TEST(WatchExitSentinels, LeadersOfWorkersThenLivingChildrenOfGpuProcessesAndHolders) {
  const auto snapshot = fixture::fixture_snapshot();
  // 201, python3 200's worker: its group leader 200 and session leader 100 (its end proves
  // 201 an orphan); 402, 401's worker, leads its own group and session: 401, its listed
  // ancestor. Then the children: 201 of 200, 402 of 401, and not 300 (already a zombie of 100,
  // which the driver lists) nor anything of 250 (a session leader: no leader to lose).
  const auto sentinels = exit_sentinels(*snapshot);
  std::vector<pid_t> pids = pids_of(sentinels);
  ASSERT_EQ(pids.size(), 5u);
  std::sort(pids.begin() + 3, pids.end());  // the children in the table's order
  EXPECT_EQ(pids, (std::vector<pid_t>{200, 100, 401, 201, 402}));
  EXPECT_EQ(sentinels.front().second, snapshot->table.find(200)->start_time_ticks) << "a reused PID is not the one watched";
}

TEST(WatchExitSentinels, TheLimitKeepsTheLeaders) {
  const auto snapshot = fixture::fixture_snapshot();
  EXPECT_EQ(pids_of(exit_sentinels(*snapshot, 2)), (std::vector<pid_t>{200, 100}));
  EXPECT_TRUE(exit_sentinels(*snapshot, 0).empty());
}

}  // namespace
}  // namespace gpureap
