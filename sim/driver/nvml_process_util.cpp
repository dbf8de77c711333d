// nvmlDeviceGetProcessUtilization: one 32-byte sample per listed process that reports
// non-zero utilization (gpusim-cuda --sm-util/--mem-util), newer than lastSeenTimeStamp.
#include <algorithm>

#include "common/clock.hpp"
#include "driver/driver_state.hpp"

using namespace gpusim;
using namespace gpusim::driver;

// The driver samples periodically; a sample's timestamp is the start of the current period
// (or the process's start, if later), so a caller passing the last timestamp it saw gets
// NOT_FOUND until the next period begins.
static constexpr unsigned long long kSamplePeriodUs = 100000;

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                          nvmlProcessUtilizationSample_t* utilization,
                                                          unsigned int* processSamplesCount,
                                                          unsigned long long lastSeenTimeStamp) {
  return on_device("nvmlDeviceGetProcessUtilization", device, [&](Call& call, const Target& t) {
    if (processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig() || t.gpu->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
    auto views = call.scan(t.gpu_index);
    if (!views) return NVML_ERROR_UNKNOWN;
    auto now_us = static_cast<unsigned long long>(realtime_ns() / 1000);
    unsigned long long period_start = now_us - now_us % kSamplePeriodUs;
    std::vector<nvmlProcessUtilizationSample_t> samples;
    for (const auto& v : *views) {
      const AllocRecord& r = v.rec;
      if (!v.owner_running() || r.gpu != t.gpu_index || (r.sm_util == 0 && r.mem_util == 0)) continue;
      auto same_pid = [&](const nvmlProcessUtilizationSample_t& s) { return s.pid == r.owner_pid; };
      if (std::any_of(samples.begin(), samples.end(), same_pid)) continue;
      nvmlProcessUtilizationSample_t s{};
      s.pid = r.owner_pid;
      auto created_us = static_cast<unsigned long long>(std::max<std::int64_t>(r.created_ns, 0) / 1000);
      s.timeStamp = std::max(period_start, created_us);
      s.smUtil = std::min(r.sm_util, 100u);
      s.memUtil = std::min(r.mem_util, 100u);
      if (s.timeStamp > lastSeenTimeStamp) samples.push_back(s);
    }
    auto n = static_cast<unsigned>(samples.size());
    if (n == 0) {
      *processSamplesCount = 0;
      return NVML_ERROR_NOT_FOUND;
    }
    if (utilization == nullptr || *processSamplesCount < n) {
      *processSamplesCount = n;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    std::copy(samples.begin(), samples.end(), utilization);
    *processSamplesCount = n;
    return NVML_SUCCESS;
  });
}
