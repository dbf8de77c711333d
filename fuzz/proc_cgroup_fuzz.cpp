// /proc/<pid>/cgroup: cgroup names are chosen by whoever may create cgroups (a delegated
// user, a container runtime, a job), so every field is hostile.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "proc/proc_parse.hpp"

namespace {

bool lower_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

void check(std::string_view text) {
  const auto ref = gpureap::parse_cgroup(text);
  if (!ref) return;
  // The path is one line's third field, taken from the input unchanged.
  FUZZ_CHECK(text.find(ref->cgroup_path) != std::string_view::npos);
  FUZZ_CHECK(ref->cgroup_path.find('\n') == std::string::npos);
  FUZZ_CHECK(ref->runtime == "docker" || ref->runtime == "containerd" || ref->runtime == "cri-o" ||
             ref->runtime == "podman" || ref->runtime == "kubernetes");
  // A container id is 12..64 lower-case hex digits found in that path.
  if (!ref->id.empty()) {
    FUZZ_CHECK(ref->id.size() >= 12 && ref->id.size() <= 64 && lower_hex(ref->id));
    FUZZ_CHECK(ref->cgroup_path.find(ref->id) != std::string::npos);
  }
  // A pod UID is a UUID or a 32-hex hash; nothing is recognised from nothing.
  if (!ref->pod_uid.empty()) {
    FUZZ_CHECK(ref->pod_uid.size() >= 32 && ref->pod_uid.size() <= 36);
    FUZZ_CHECK(ref->pod_uid.find_first_not_of("0123456789abcdef-") == std::string::npos);
  }
  FUZZ_CHECK(!ref->id.empty() || !ref->pod_uid.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
