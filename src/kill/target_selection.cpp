#include "kill/target_selection.hpp"

#include <algorithm>
#include <stdexcept>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "kill/command_pattern.hpp"
#include "text/human_format.hpp"

namespace gpureap {
namespace {

class Selector {
 public:
  Selector(const Snapshot& snapshot, const SelectionCriteria& criteria)
      : snapshot_(snapshot), criteria_(criteria) {
    if (!criteria.name_regex.empty()) {
      std::string error;
      pattern_ = CommandPattern::compile(criteria.name_regex, error);
      if (!pattern_) throw std::invalid_argument(error);
    }
  }

  Selection run() {
    for (pid_t pid : criteria_.pids) select_named(pid);
    if (criteria_.has_filters()) select_by_filters();
    // Expansions walk the targets chosen so far; new ones are appended and walked too.
    for (std::size_t i = 0; i < selection_.processes.size(); ++i) {
      const SelectedProcess current = selection_.processes[i];
      if (!current.present) continue;
      if (criteria_.tree) add_descendants(current.pid);
      if (criteria_.group) add_group(current.pid);
    }
    return std::move(selection_);
  }

 private:
  bool add(SelectedProcess process) {
    if (!chosen_.insert(process.pid).second) return false;
    selection_.processes.push_back(std::move(process));
    return true;
  }

  std::string listed_text(pid_t pid) const {
    std::string text;
    for (const auto& p : snapshot_.processes) {
      if (static_cast<pid_t>(p.driver.pid) != pid) continue;
      text += fmt::format("{}GPU {} ({})", text.empty() ? "" : ", ", p.gpu_index,
                          p.driver.used_memory ? format_bytes(*p.driver.used_memory) : std::string("memory unknown"));
    }
    return text;
  }

  void select_named(pid_t pid) {
    const ProcessInfo* process = snapshot_.table.find(pid);
    const std::string listed = listed_text(pid);
    if (process == nullptr && listed.empty()) {
      selection_.missing.push_back(pid);
      return;
    }
    SelectedProcess selected;
    selected.pid = pid;
    selected.present = process != nullptr;
    selected.reason = listed.empty() ? criteria_.named_reason
                                     : criteria_.named_reason + "; the driver lists it on " + listed;
    add(std::move(selected));
  }

  bool linux_filters_match(const ProcessInfo* process) const {
    if (!criteria_.users.empty()) {
      if (process == nullptr) return false;
      const auto uid_text = std::to_string(process->uid);
      if (std::none_of(criteria_.users.begin(), criteria_.users.end(),
                       [&](const std::string& u) { return u == process->user || u == uid_text; })) {
        return false;
      }
    }
    if (pattern_) {
      if (process == nullptr || !pattern_->search(process->command())) return false;
    }
    if (!criteria_.containers.empty()) {
      if (process == nullptr || !process->container) return false;
      const auto& c = *process->container;
      if (std::none_of(criteria_.containers.begin(), criteria_.containers.end(), [&](const std::string& w) {
            return container_selected_by(c, w, criteria_.container_selector);
          })) {
        return false;
      }
    }
    return true;
  }

  // With --gpu naming AMD or Intel GPUs: whether `pid` holds memory on one of them (a client of
  // it, or KFD allocations there). Without a GPU filter every one is wanted.
  bool on_wanted_drm_gpu(pid_t pid) const {
    if (!criteria_.gpu_filter()) return true;
    for (const auto& [pci, bytes] : snapshot_.drm_memory_of(pid)) {
      if (std::find(criteria_.drm_gpus.begin(), criteria_.drm_gpus.end(), pci) != criteria_.drm_gpus.end()) return true;
    }
    return false;
  }

  bool gpu_wanted(unsigned index) const {
    return !criteria_.gpu_filter() ||
           std::find(criteria_.gpus.begin(), criteria_.gpus.end(), index) != criteria_.gpus.end();
  }

  std::string filter_words() const {
    std::vector<std::string> words;
    if (!criteria_.users.empty()) words.push_back("--user");
    if (!criteria_.name_regex.empty()) words.push_back("--name");
    if (!criteria_.containers.empty()) words.push_back("--container");
    if (words.empty()) return {};
    std::string text = " matching ";
    for (std::size_t i = 0; i < words.size(); ++i) text += (i ? ", " : "") + words[i];
    return text;
  }

  void select_by_filters() {
    const bool processes_wanted = criteria_.all || criteria_.gpu_filter() || !criteria_.users.empty() ||
                                  !criteria_.name_regex.empty() || !criteria_.containers.empty();
    if (processes_wanted) {
      for (const auto& p : snapshot_.processes) {
        const auto pid = static_cast<pid_t>(p.driver.pid);
        if (p.linux_process == nullptr && !p.held_by.empty() && gpu_wanted(p.gpu_index)) {
          // Exited, but listed while its forked holders keep the context: they are what to end.
          for (pid_t holder : p.held_by) {
            if (!linux_filters_match(snapshot_.table.find(holder))) continue;
            SelectedProcess selected;
            selected.pid = holder;
            selected.reason = fmt::format("keeps the context of exited PID {} alive (the driver lists it on {}){}", pid,
                                          listed_text(pid), filter_words());
            add(std::move(selected));
          }
          continue;
        }
        if (!gpu_wanted(p.gpu_index) || !linux_filters_match(p.linux_process)) continue;
        SelectedProcess selected;
        selected.pid = pid;
        selected.present = p.linux_process != nullptr;
        selected.reason = fmt::format("the driver lists it on {}{}", listed_text(pid), filter_words());
        add(std::move(selected));
      }
      // AMD GPUs have no driver list: ROCm jobs, by their /dev/kfd, stand for listed processes.
      if (!criteria_.gpu_filter() || !criteria_.drm_gpus.empty()) select_rocm_jobs();
    }
    if (criteria_.holders) select_holders();
  }

  // Each ROCm job's root (a process holding /dev/kfd whose ancestors hold none): its forked
  // workers join through the tree. A render or card node alone never selects a process.
  void select_rocm_jobs() {
    std::vector<pid_t> pids;
    for (const auto& [pid, info] : snapshot_.table.processes()) {
      if (info.state != 'Z' && !info.kernel_thread && snapshot_.rocm_compute(info)) pids.push_back(pid);
    }
    std::sort(pids.begin(), pids.end());
    for (const pid_t pid : pids) {
      const ProcessInfo& info = *snapshot_.table.find(pid);
      // A worker of another ROCm job's root joins with it, through the tree.
      if (snapshot_.rocm_ancestor(info) != 0 || !linux_filters_match(&info) || !on_wanted_drm_gpu(pid)) continue;
      std::string memory;
      for (const auto& [pci, bytes] : snapshot_.drm_memory_of(pid)) {
        memory += fmt::format("{}AMD GPU {} ({})", memory.empty() ? "" : ", ", pci, format_bytes(bytes));
      }
      SelectedProcess selected;
      selected.pid = pid;
      selected.reason = fmt::format("ROCm compute: holds /dev/kfd and has its own KFD context{}{}", memory.empty() ? "" : "; on " + memory,
                                    filter_words());
      add(std::move(selected));
    }
    // A dead job's leftovers: the processes keeping its KFD context (and its memory) alive.
    for (const auto& kfd : snapshot_.drm.kfd_processes) {
      for (const pid_t holder : snapshot_.kfd_context_holders(kfd.pid)) {
        if (!linux_filters_match(snapshot_.table.find(holder)) || !on_wanted_drm_gpu(holder)) continue;
        SelectedProcess selected;
        selected.pid = holder;
        selected.reason = fmt::format("keeps the KFD context of exited ROCm job {} alive (holds its /dev/kfd and render "
                                      "client){}",
                                      kfd.pid, filter_words());
        add(std::move(selected));
      }
    }
  }

  // Unlisted holders whose job is provably over (an orphan with evidence, or the keeper of an
  // exited listed PID's context), and workers of a job selected above. A running job's
  // DataLoader workers are neither: ending them breaks that job.
  void select_holders() {
    for (const auto& h : snapshot_.holders) {
      if (std::none_of(h.gpus.begin(), h.gpus.end(), [&](unsigned g) { return gpu_wanted(g); })) continue;
      if (!linux_filters_match(h.linux_process)) continue;
      std::string gpus;
      for (unsigned g : h.gpus) gpus += fmt::format("{}{}", gpus.empty() ? "" : ",", g);
      SelectedProcess selected;
      selected.pid = h.pid;
      if (h.context_of) {
        selected.reason = fmt::format("keeps the context of exited PID {} alive, holding GPU {}'s device file",
                                      *h.context_of, gpus);
      } else if (h.role == HolderRole::Orphan) {
        selected.reason = fmt::format("orphan of a job that has ended, holding GPU {}'s device file", gpus);
      } else if (h.role == HolderRole::Worker && h.listed_ancestor && chosen_.count(*h.listed_ancestor)) {
        selected.reason = fmt::format("worker of selected PID {}, holding GPU {}'s device file", *h.listed_ancestor, gpus);
        selected.via = *h.listed_ancestor;
      } else {
        continue;  // a running job's worker, an unlisted holder without evidence, a client
      }
      add(std::move(selected));
    }
  }

  std::string holds_text(const ProcessInfo& process, const ProcessInfo& root) const {
    std::set<std::string> paths;
    for (const auto& f : process.device_files) {
      if (f.kind == DeviceFileKind::Gpu) paths.insert(f.path);
    }
    // AMD and Intel GPUs: /dev/kfd (ROCm compute), or a render node the root holds too (a
    // worker that inherited its GPU); a card node, or another GPU's render node, proves nothing.
    for (const auto& f : process.drm_files) {
      const bool root_holds_node = f.kind == DeviceFileKind::DrmRender &&
                                   std::any_of(root.drm_files.begin(), root.drm_files.end(), [&](const DeviceFileHandle& r) {
                                     return r.kind == DeviceFileKind::DrmRender && r.minor == f.minor;
                                   });
      if (f.kind == DeviceFileKind::Kfd || root_holds_node) paths.insert(f.path);
    }
    if (paths.empty()) return {};
    std::string text;
    for (const auto& p : paths) text += (text.empty() ? "" : ", ") + p;
    return text;
  }

  void add_descendants(pid_t root) {
    const ProcessInfo* root_process = snapshot_.table.find(root);
    if (root_process == nullptr) return;
    for (const pid_t pid : snapshot_.table.descendants_of(root)) {
      const ProcessInfo* child = snapshot_.table.find(pid);
      if (child == nullptr) continue;
      const std::string holds = holds_text(*child, *root_process);
      const bool same_group = child->pgid == root_process->pgid;
      if (holds.empty() && !same_group) continue;
      SelectedProcess selected;
      selected.pid = pid;
      selected.via = root;
      selected.by_tree = true;
      selected.reason = !holds.empty()
                            ? fmt::format("descendant of {} holding {}", root, holds)
                            : fmt::format("descendant of {} in its process group {}", root, root_process->pgid);
      add(std::move(selected));
    }
  }

  void add_group(pid_t member) {
    const ProcessInfo* process = snapshot_.table.find(member);
    if (process == nullptr || process->pgid <= 0) return;
    std::vector<pid_t> members;
    for (const auto& [pid, info] : snapshot_.table.processes()) {
      if (info.pgid == process->pgid && !info.kernel_thread) members.push_back(pid);
    }
    std::sort(members.begin(), members.end());
    for (pid_t pid : members) {
      SelectedProcess selected;
      selected.pid = pid;
      selected.via = member;
      selected.by_group = true;
      selected.reason = fmt::format("in process group {} of {}", process->pgid, member);
      add(std::move(selected));
    }
  }

  const Snapshot& snapshot_;
  const SelectionCriteria& criteria_;
  std::optional<CommandPattern> pattern_;
  Selection selection_;
  std::unordered_set<pid_t> chosen_;
};

}  // namespace

Selection select_targets(const Snapshot& snapshot, const SelectionCriteria& criteria) {
  return Selector(snapshot, criteria).run();
}

}  // namespace gpureap
