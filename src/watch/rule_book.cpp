#include "watch/rule_book.hpp"

#include <algorithm>

namespace gpureap {

void RuleBook::set_policy(std::shared_ptr<const Policy> policy) {
  policy_ = std::move(policy);
  groups_ = GroupMemberships{};  // the group database may have changed too
  std::set<std::string> names;
  for (const auto& r : policy_->rules) names.insert(r.name);
  std::erase_if(states_, [&](const auto& entry) { return names.count(entry.first.first) == 0; });
}

bool RuleBook::quiet(const Rule& rule, const Candidate& candidate, double cpu_delta, double elapsed) const {
  if (!candidate.sm_util_percent || *candidate.sm_util_percent > rule.max_sm_util_percent) return false;
  return cpu_delta <= rule.max_cpu_percent / 100.0 * elapsed + 1e-9;
}

std::vector<Decision> RuleBook::evaluate(const Look& look) {
  std::vector<Decision> decisions;
  std::set<std::pair<std::string, Key>> seen;
  for (const Candidate& c : look.candidates) {
    const Key key = c.key();
    const auto previous = cpu_.find(key);
    // A look that did not read its CPU again (observation.hpp) brings no new window.
    const Clock::time_point cpu_at = c.cpu_read_at;
    const bool new_window = previous == cpu_.end() || cpu_at > previous->second.at;
    for (const Rule& rule : policy_->rules) {
      const auto id = std::make_pair(rule.name, key);
      const auto found = states_.find(id);
      if (!rule_selects(rule, policy_->exclude, c, look.gpu_uuids, groups_)) {
        if (found != states_.end()) {
          if (found->second.noticed_at) decisions.push_back({DecisionKind::Cleared, &rule, c, 0});
          states_.erase(found);
        }
        continue;
      }
      State& state = states_[id];
      seen.insert(id);
      bool holds = false;
      if (rule.condition == Condition::Idle) {
        // Quiet between the previous reading and this one: the quiet spell began at the previous.
        if (previous != cpu_.end() && new_window) {
          const double elapsed = std::chrono::duration<double>(cpu_at - previous->second.at).count();
          const double delta = std::max(0.0, c.cpu_seconds - previous->second.cpu_seconds);
          if (quiet(rule, c, delta, elapsed)) {
            if (!state.quiet_since) state.quiet_since = previous->second.at;
          } else {
            state.quiet_since.reset();
          }
        }
        holds = state.quiet_since &&
                look.at - *state.quiet_since >= std::chrono::duration<double>(rule.idle_seconds);
      } else {
        holds = stateless_condition_holds(rule, c);
      }
      if (!holds) {
        if (state.noticed_at) {
          decisions.push_back({DecisionKind::Cleared, &rule, c, 0});
          state.noticed_at.reset();
          state.acted = false;
          state.capped = false;
        }
        continue;
      }
      state.last = c;
      if (!state.noticed_at) {
        state.noticed_at = look.at;
        decisions.push_back({DecisionKind::Notice, &rule, c, rule.action == RuleAction::Terminate ? rule.grace_seconds : 0});
      }
      const double waited = std::chrono::duration<double>(look.at - *state.noticed_at).count();
      if (rule.action == RuleAction::Terminate && !state.acted && waited >= rule.grace_seconds) {
        decisions.push_back({DecisionKind::Due, &rule, c, 0});
      }
    }
    if (new_window) cpu_[key] = {c.cpu_seconds, cpu_at};
  }
  // What this look did not see: gone, unless it could not be judged (frozen).
  for (auto it = states_.begin(); it != states_.end();) {
    if (seen.count(it->first) || look.frozen.count(it->first.second)) {
      ++it;
      continue;
    }
    const bool candidate_here = std::any_of(look.candidates.begin(), look.candidates.end(),
                                            [&](const Candidate& c) { return c.key() == it->first.second; });
    // After the action, the terminate line has said what became of it.
    if (!candidate_here && it->second.noticed_at && !it->second.acted) {
      const auto rule = std::find_if(policy_->rules.begin(), policy_->rules.end(),
                                     [&](const Rule& r) { return r.name == it->first.first; });
      if (rule != policy_->rules.end()) decisions.push_back({DecisionKind::Gone, &*rule, it->second.last, 0});
    }
    it = states_.erase(it);
  }
  std::erase_if(cpu_, [&](const auto& entry) {
    if (look.frozen.count(entry.first)) return false;
    return std::none_of(look.candidates.begin(), look.candidates.end(),
                        [&](const Candidate& c) { return c.key() == entry.first; });
  });
  return decisions;
}

void RuleBook::mark_acted(const Rule& rule, const Key& key) {
  if (auto it = states_.find({rule.name, key}); it != states_.end()) it->second.acted = true;
}

void RuleBook::unmark_acted(const Rule& rule, const Key& key) {
  if (auto it = states_.find({rule.name, key}); it != states_.end()) it->second.acted = false;
}

bool RuleBook::mark_capped(const Rule& rule, const Key& key) {
  auto it = states_.find({rule.name, key});
  if (it == states_.end() || it->second.capped) return false;
  it->second.capped = true;
  return true;
}

bool RuleBook::still_holds(const Rule& rule, const Candidate& seen, const Candidate& fresh, double seconds_since,
                           const std::map<unsigned, std::string>& gpu_uuids) {
  if (fresh.key() != seen.key() || fresh.kind != seen.kind) return false;
  if (!rule_selects(rule, policy_->exclude, fresh, gpu_uuids, groups_)) return false;
  if (rule.condition == Condition::Idle) {
    return quiet(rule, fresh, std::max(0.0, fresh.cpu_seconds - seen.cpu_seconds), seconds_since);
  }
  return stateless_condition_holds(rule, fresh);
}

}  // namespace gpureap
