#include "watch/rule_match.hpp"

#include <algorithm>

#include "accounts/account_lookup.hpp"

namespace gpureap {
namespace {

bool prefix_of(const std::string& prefix, const std::string& text) {
  return !prefix.empty() && text.compare(0, prefix.size(), prefix) == 0;
}

bool in_container(const std::vector<std::string>& prefixes, const Candidate& c) {
  if (!c.container) return false;
  // Policy written by root for every user: a rootless container's id is its user's word.
  return std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) {
    return container_selected_by(*c.container, p, std::nullopt);
  });
}

bool user_listed(const std::vector<NamedId>& users, const Candidate& c) {
  return std::any_of(users.begin(), users.end(), [&](const NamedId& u) { return u.id == c.uid; });
}

bool group_listed(const std::vector<NamedId>& list, const Candidate& c, GroupMemberships& groups) {
  return std::any_of(list.begin(), list.end(), [&](const NamedId& g) { return groups.member(c.uid, g.id); });
}

bool executable_listed(const std::vector<std::string>& paths, const Candidate& c) {
  if (c.exe.empty()) return false;
  return std::any_of(paths.begin(), paths.end(), [&](const std::string& p) {
    if (p.size() > 1 && p.back() == '*') return c.exe.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0;
    return c.exe == p;
  });
}

bool on_gpu(const std::vector<GpuRef>& gpus, const Candidate& c, const std::map<unsigned, std::string>& uuids) {
  return std::any_of(gpus.begin(), gpus.end(), [&](const GpuRef& ref) {
    if (!ref.pci.empty()) return c.drm_memory.count(ref.pci) > 0;
    return std::any_of(c.gpus.begin(), c.gpus.end(), [&](unsigned index) {
      if (ref.index) return *ref.index == index;
      const auto it = uuids.find(index);
      return it != uuids.end() && prefix_of(ref.uuid, it->second);
    });
  });
}

}  // namespace

bool GroupMemberships::member(uid_t uid, gid_t gid) {
  auto it = groups_.find(uid);
  if (it == groups_.end()) it = groups_.emplace(uid, groups_of_user(uid)).first;
  return std::find(it->second.begin(), it->second.end(), gid) != it->second.end();
}

bool condition_fits_kind(Condition condition, CandidateKind kind) {
  switch (condition) {
    case Condition::Orphan: return kind == CandidateKind::Orphan;
    case Condition::Zombie: return kind == CandidateKind::Zombie;
    default: return kind == CandidateKind::GpuProcess || kind == CandidateKind::RocmProcess;
  }
}

bool excluded_by(const ProcessExclusion& exclusion, const Candidate& candidate, GroupMemberships& groups) {
  return user_listed(exclusion.users, candidate) || group_listed(exclusion.groups, candidate, groups) ||
         executable_listed(exclusion.executables, candidate) || in_container(exclusion.containers, candidate);
}

bool rule_selects(const Rule& rule, const ProcessExclusion& global, const Candidate& candidate,
                  const std::map<unsigned, std::string>& gpu_uuids, GroupMemberships& groups) {
  if (!condition_fits_kind(rule.condition, candidate.kind)) return false;
  const ProcessMatch& m = rule.match;
  if (!m.users.empty() && !user_listed(m.users, candidate)) return false;
  if (!m.groups.empty() && !group_listed(m.groups, candidate, groups)) return false;
  if (m.command && !m.command->search(candidate.command)) return false;
  if (!m.gpus.empty() && !on_gpu(m.gpus, candidate, gpu_uuids)) return false;
  if (!m.containers.empty() && !in_container(m.containers, candidate)) return false;
  if (m.min_memory && candidate.memory_bytes() < *m.min_memory) return false;
  return !excluded_by(global, candidate, groups) && !excluded_by(rule.except, candidate, groups);
}

bool stateless_condition_holds(const Rule& rule, const Candidate& candidate) {
  switch (rule.condition) {
    case Condition::OverAge: return candidate.age_seconds >= rule.older_than_seconds;
    case Condition::Memory: return candidate.memory_bytes() > rule.memory_above_bytes;
    case Condition::Orphan: return candidate.kind == CandidateKind::Orphan;
    case Condition::Zombie: return candidate.kind == CandidateKind::Zombie && candidate.state == 'Z';
    case Condition::Idle: return false;
  }
  return false;
}

}  // namespace gpureap
