#include "cli/ps/ps_filter.hpp"

#include <algorithm>

#include "cli/common/selection_checks.hpp"

namespace gpureap {

bool PsFilter::gpu_selected(unsigned index) const { return !gpus || gpus->has_nvidia(index); }

bool PsFilter::drm_gpu_selected(const std::string& pci) const { return !gpus || gpus->has_drm(pci); }

bool PsFilter::linux_selected(pid_t pid, const ProcessInfo* process) const {
  if (!pids.empty() && std::find(pids.begin(), pids.end(), pid) == pids.end()) return false;
  if (!users.empty()) {
    if (process == nullptr) return false;
    const auto uid_text = std::to_string(process->uid);
    if (std::none_of(users.begin(), users.end(), [&](const std::string& user) {
          return user == process->user || user == uid_text;
        })) {
      return false;
    }
  }
  if (!containers.empty()) {
    if (process == nullptr || !process->container) return false;
    const auto& c = *process->container;
    if (std::none_of(containers.begin(), containers.end(), [&](const std::string& wanted) {
          return container_has_prefix(c, wanted);
        })) {
      return false;
    }
  }
  return true;
}

bool PsFilter::process_selected(const GpuProcessView& process) const {
  return gpu_selected(process.gpu_index) &&
         linux_selected(static_cast<pid_t>(process.driver.pid), process.linux_process);
}

bool PsFilter::holder_selected(const HolderView& holder) const {
  if (gpus && std::none_of(holder.gpus.begin(), holder.gpus.end(),
                                    [this](unsigned g) { return gpu_selected(g); })) {
    return false;
  }
  return linux_selected(holder.pid, holder.linux_process);
}

}  // namespace gpureap
