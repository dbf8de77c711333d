// What `gpureap watch --check-config` prints: the policy as a person checks it, rule by rule.
#pragma once

#include <string>

#include "watch/policy.hpp"

namespace gpureap {

std::string render_policy_summary(const Policy& policy);

}  // namespace gpureap
