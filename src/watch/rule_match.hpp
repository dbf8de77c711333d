// Whether a rule is about a candidate: its kind fits the condition, every match key given
// holds, and neither the policy's exclusions nor the rule's own spare it. Stateless; the
// conditions that need time (idle, the grace) are the rule book's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <sys/types.h>

#include "watch/observation.hpp"
#include "watch/policy.hpp"

namespace gpureap {

// Group memberships per uid, looked up once per policy (the group database may be LDAP).
class GroupMemberships {
 public:
  bool member(uid_t uid, gid_t gid);

 private:
  std::map<uid_t, std::vector<gid_t>> groups_;
};

// idle, over-age and memory judge GPU and ROCm processes; orphan, orphans; zombie, zombies.
bool condition_fits_kind(Condition condition, CandidateKind kind);

bool excluded_by(const ProcessExclusion& exclusion, const Candidate& candidate, GroupMemberships& groups);

// `gpu_uuids`: index -> lower-case UUID, for GPUs named by UUID. A GPU named by index or UUID
// is NVIDIA's: it matches no ROCm process; one named by PCI address matches a process holding
// memory (a DRM client or a KFD context) on the AMD or Intel GPU at that address.
bool rule_selects(const Rule& rule, const ProcessExclusion& global, const Candidate& candidate,
                  const std::map<unsigned, std::string>& gpu_uuids, GroupMemberships& groups);

// The conditions that need no history: over-age, memory, orphan, zombie (idle is the rule book's).
bool stateless_condition_holds(const Rule& rule, const Candidate& candidate);

}  // namespace gpureap
