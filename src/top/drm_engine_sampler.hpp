// Engine use of a DRM client between two refreshes, from the growth of its drm-engine-<name>
// busy time (ns; divided by drm-engine-capacity-<name>) or, where the driver counts cycles (xe),
// of drm-cycles-<name> against drm-total-cycles-<name>: what the kernel's drm-usage-stats
// document says a tool derives utilisation from. The busiest engine's share is shown.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "drm/client_ledger.hpp"

namespace gpureap {

class DrmEngineSampler {
 public:
  // Percent (0-100) of the client's busiest engine since it was last sampled; nullopt on first
  // sight, for a client without drm-client-id (it cannot be followed), and without engine keys.
  std::optional<unsigned> sample(const drm::DrmClient& client, std::chrono::steady_clock::time_point now);
  // Forgets the clients not sampled since the last call.
  void end_round();

 private:
  struct Last {
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> engines;  // busy ns or cycles, total cycles
    std::chrono::steady_clock::time_point at;
    bool seen = false;
  };
  std::map<std::pair<std::string, std::uint64_t>, Last> last_;
};

}  // namespace gpureap
