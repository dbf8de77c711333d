// watch's container keys against a process in a user's own cgroup tree named like a container:
// a user who names their scope docker-<id>.scope under user@<uid>.service must not escape the
// policy through `exclude.containers` or a rule's `except_containers`, and a rule aimed at the
// runtime's container must not take their process for it. The runtime's container still matches.
#include <gtest/gtest.h>

#include "proc/proc_parse.hpp"
#include "watch/rule_match.hpp"

namespace gpureap {
namespace {

constexpr const char* kId = "3f1c1a2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";

Candidate in_cgroup(const std::string& path, uid_t uid) {
  Candidate c;
  c.pid = 4242;
  c.uid = uid;
  c.container = parse_cgroup("0::" + path + "\n");
  return c;
}

TEST(WatchRuleContainer, AUsersOwnScopeNamedLikeAContainerNeitherEscapesNorMatches) {
  const Candidate real = in_cgroup(std::string("/system.slice/docker-") + kId + ".scope", 1000);
  const Candidate forged =
      in_cgroup(std::string("/user.slice/user-1000.slice/user@1000.service/app.slice/docker-") + kId + ".scope", 1000);
  ASSERT_TRUE(real.container && forged.container);
  ProcessExclusion exclusion;
  exclusion.containers = {std::string(kId).substr(0, 12)};
  GroupMemberships groups;
  EXPECT_TRUE(excluded_by(exclusion, real, groups));
  EXPECT_FALSE(excluded_by(exclusion, forged, groups)) << "a user's own name is no exclusion";

  Rule rule;
  rule.condition = Condition::Memory;
  rule.match.containers = exclusion.containers;
  EXPECT_TRUE(rule_selects(rule, {}, real, {}, groups));
  EXPECT_FALSE(rule_selects(rule, {}, forged, {}, groups)) << "not the runtime's container";
  Rule spares = rule;
  spares.match.containers.clear();
  spares.except.containers = exclusion.containers;
  EXPECT_FALSE(rule_selects(spares, {}, real, {}, groups));
  EXPECT_TRUE(rule_selects(spares, {}, forged, {}, groups)) << "a rule's except_containers is no escape either";
}

}  // namespace
}  // namespace gpureap
