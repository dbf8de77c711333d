// The rules over time: for each (rule, process) pair, since when the idle condition has held,
// when the process was first noticed (the grace starts then), and whether the action was
// taken. One look in, the decisions it brings out: a first notice, an action that is due, a
// match that cleared, a noticed process that is gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "watch/observation.hpp"
#include "watch/policy.hpp"
#include "watch/rule_match.hpp"

namespace gpureap {

enum class DecisionKind {
  Notice,   // the rule holds for the first time: log, count, notify (terminate: the grace starts)
  Due,      // terminate: the grace has passed and it still holds
  Cleared,  // a noticed process no longer matches (it woke up, shrank, was excluded)
  Gone,     // a noticed process is no longer there to judge (it ended, or stopped using a GPU)
};

struct Decision {
  DecisionKind kind = DecisionKind::Notice;
  const Rule* rule = nullptr;  // into the book's policy
  Candidate candidate;         // as this look saw it (Gone: as last seen)
  double grace_left_seconds = 0;
};

class RuleBook {
 public:
  using Clock = std::chrono::steady_clock;
  using Key = std::pair<pid_t, std::uint64_t>;

  // A new policy. What is known of rules that keep their name stays (a reload restarts no
  // grace period and no idle timer); the rest is dropped.
  void set_policy(std::shared_ptr<const Policy> policy);
  const Policy& policy() const { return *policy_; }

  std::vector<Decision> evaluate(const Look& look);

  // After the action (or its dry-run line): not again while the match lasts.
  void mark_acted(const Rule& rule, const Key& key);
  // An action that did nothing after all (gone, no longer matching, not judgeable): it may be
  // due again at a later look.
  void unmark_acted(const Rule& rule, const Key& key);
  // Deferred by the cap: true the first time for this match (the counter counts it once).
  bool mark_capped(const Rule& rule, const Key& key);

  // The re-check on a fresh snapshot just before acting: the rule selects `fresh` (the same
  // process, read again) and its condition still holds; for idle, no more than the allowed
  // CPU since the look saw it (`seen`, its CPU read `seconds_since` ago) and SM utilisation still low.
  bool still_holds(const Rule& rule, const Candidate& seen, const Candidate& fresh, double seconds_since,
                   const std::map<unsigned, std::string>& gpu_uuids);

 private:
  struct State {
    std::optional<Clock::time_point> quiet_since;  // idle: since when it has been quiet
    std::optional<Clock::time_point> noticed_at;
    bool acted = false;
    bool capped = false;
    Candidate last;
  };
  struct CpuSample {
    double cpu_seconds = 0;
    Clock::time_point at;
  };

  bool quiet(const Rule& rule, const Candidate& candidate, double cpu_delta, double elapsed) const;

  std::shared_ptr<const Policy> policy_;
  GroupMemberships groups_;
  std::map<std::pair<std::string, Key>, State> states_;
  std::map<Key, CpuSample> cpu_;
};

}  // namespace gpureap
