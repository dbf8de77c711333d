// What `watch --check-config` checks beyond the file, as the daemon does at start: the GPUs the
// rules name against the driver of this host, when there is one, and those named by PCI address
// against its AMD and Intel GPUs in sysfs.
#pragma once

#include <string>

#include "watch/policy.hpp"

namespace gpureap {

struct PolicyHostCheck {
  bool driver_read = false;  // false: no driver here (or it failed); `note` says why
  std::string problem;       // "" when the GPUs the rules name exist; else the daemon's refusal
  std::string note;
};

PolicyHostCheck check_policy_on_this_host(const Policy& policy);

}  // namespace gpureap
