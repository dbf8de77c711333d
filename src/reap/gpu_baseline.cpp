#include "reap/gpu_baseline.hpp"

#include <poll.h>

#include <algorithm>
#include <climits>

#include <fmt/format.h>

#include "text/human_format.hpp"

namespace gpureap {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::uint64_t default_baseline_bytes(const GpuView& gpu, std::size_t outside_listed) {
  return overhead_tolerance_bytes(outside_listed) + reservation_allowance_bytes(gpu);
}

std::vector<ReapGpuResult> verify_baseline(const std::vector<ReapGpuCheck>& gpus, const std::set<pid_t>& listed_pids,
                                           const std::function<std::optional<DriverReading>()>& poll_driver,
                                           const ReapVerifyOptions& options) {
  std::vector<ReapGpuResult> results;
  for (const auto& g : gpus) results.push_back(ReapGpuResult{.index = g.index});
  const auto start = Clock::now();
  const auto deadline = start + options.timeout;
  bool read_once = false;
  while (true) {
    const auto reading = poll_driver();
    if (!reading) break;
    read_once = true;
    std::size_t pending = 0;
    for (std::size_t i = 0; i < results.size(); ++i) {
      auto& r = results[i];
      if (r.verified) continue;
      const auto it = std::find_if(reading->gpus.begin(), reading->gpus.end(),
                                   [&](const GpuReading& now) { return now.index == r.index; });
      ++pending;
      if (it == reading->gpus.end() || it->error) {
        r.message = fmt::format("GPU {} could not be read: not verified", r.index);
        continue;
      }
      r.still_listed.clear();
      r.outside_bytes = 0;
      std::size_t outside = 0;
      for (const auto& p : it->processes) {
        if (listed_pids.count(static_cast<pid_t>(p.pid))) {
          r.still_listed.push_back(static_cast<pid_t>(p.pid));
        } else {
          ++outside;
          r.outside_bytes += p.used_memory.value_or(0);
        }
      }
      GpuView view;
      view.reading = *it;
      view.memory.reserved = it->memory.reserved;
      view.memory.total = it->memory.total;
      r.baseline_bytes = gpus[i].baseline_override.value_or(default_baseline_bytes(view, outside));
      r.used_bytes = it->memory.used;
      const std::uint64_t job_bytes =
          r.used_bytes ? (*r.used_bytes > r.outside_bytes ? *r.used_bytes - r.outside_bytes : 0) : UINT64_MAX;
      if (r.still_listed.empty() && job_bytes <= r.baseline_bytes) {
        r.verified = true;
        r.message.clear();
        r.verify_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        --pending;
      } else if (!r.still_listed.empty()) {
        std::string pids;
        for (pid_t pid : r.still_listed) pids += fmt::format("{}{}", pids.empty() ? "" : ", ", pid);
        r.message = fmt::format("GPU {}: the driver still lists PID {} of the job", r.index, pids);
      } else if (!r.used_bytes) {
        r.message = fmt::format("GPU {}: the driver does not report its used memory: not verified", r.index);
      } else {
        r.message = fmt::format(
            "GPU {}: {} in use beyond what processes outside the job hold ({}), above the baseline of {}: held by "
            "no process of the job (a release still in progress, or leaked: run `gpureap doctor`)",
            r.index, format_bytes(job_bytes), format_bytes(r.outside_bytes), format_bytes(r.baseline_bytes));
      }
    }
    if (pending == 0 || Clock::now() >= deadline) break;
    poll(nullptr, 0, static_cast<int>(options.interval.count()));
  }
  if (!read_once) {
    for (auto& r : results) r.message = fmt::format("GPU {}: the driver could not be read: not verified", r.index);
  }
  return results;
}

}  // namespace gpureap
