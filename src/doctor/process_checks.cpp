// Zombies linked to GPU processes, and processes holding a GPU in uninterruptible sleep (D),
// which no signal ends until the kernel call they wait in returns.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "text/human_format.hpp"
#include "spawn/debugger_commands.hpp"
#include "doctor/blocked_io.hpp"
#include "doctor/doctor.hpp"

namespace gpureap {
namespace {

std::optional<unsigned> single_gpu(const Snapshot& snapshot, pid_t pid) {
  if (const HolderView* h = snapshot.holder(pid); h != nullptr && h->gpus.size() == 1) return h->gpus.front();
  return std::nullopt;
}

}  // namespace

void check_zombies(const Snapshot& snapshot, Diagnosis& diagnosis) {
  for (const auto& [pid, zombie] : snapshot.table.processes()) {
    if (zombie.state != 'Z') continue;
    const ProcessInfo* parent = snapshot.table.find(zombie.ppid);
    const bool listed = snapshot.lists(pid);
    const bool parent_gpu = parent != nullptr && (snapshot.lists(parent->pid) || snapshot.holder(parent->pid));
    if (!listed && !parent_gpu && !zombie.holds_any_device_file()) continue;
    Finding f;
    f.id = FindingId::Zombie;
    // A zombie holds nothing, unless its threads still do (then the driver may list it).
    const bool stuck_parent = parent != nullptr && (parent->state == 'T' || parent->state == 'D' || parent->state == 'Z');
    f.severity = (listed || zombie.holds_any_device_file() || stuck_parent) ? Severity::Warning : Severity::Info;
    f.gpu = parent != nullptr ? single_gpu(snapshot, parent->pid) : std::nullopt;
    const std::string parent_text =
        parent == nullptr ? std::string("its parent is not visible")
                          : fmt::format("parent {} ({}, state {}{})", parent->pid, parent->command(), parent->state,
                                        parent_gpu ? ", a GPU process" : "");
    f.summary = fmt::format("Zombie process {} ({}) not reaped by its {}", pid, zombie.comm, parent_text);
    f.details.push_back(zombie.holds_any_device_file()
                            ? "Its main thread exited but other threads still hold GPU device files."
                            : "A zombie holds no GPU memory: its descriptors closed when it exited. Only its parent "
                              "can clear it, by waiting for it.");
    f.evidence["pid"] = pid;
    f.evidence["command"] = zombie.comm;
    f.evidence["listed_by_driver"] = listed;
    f.evidence["holds_device_files"] = zombie.holds_any_device_file();
    f.evidence["parent"] = parent == nullptr ? EvidenceValue(nullptr)
                                             : Evidence{{"pid", parent->pid},
                                                              {"command", parent->command()},
                                                              {"state", std::string(1, parent->state)},
                                                              {"gpu_process", parent_gpu}};
    if (parent != nullptr && parent->pid > 1) {
      f.remedies.push_back({fmt::format("kill -CHLD {}", parent->pid), Risk::None,
                            "remind the parent to reap its child (harmless)", true});
      f.remedies.push_back({fmt::format("gpureap kill {}", parent->pid), Risk::Medium,
                            "end the parent: the zombie is then reaped by init (ends the parent's job); "
                            "doctor --fix --only zombie does this",
                            false});
      FixAction nudge;
      nudge.kind = FixAction::Kind::ReapZombies;
      nudge.finding_id = FindingId::Zombie;
      nudge.pids = {parent->pid};
      nudge.description = fmt::format("send SIGCHLD to PID {}, the parent of zombie {}", parent->pid, pid);
      diagnosis.fixes.push_back(nudge);
      FixAction end;
      end.kind = FixAction::Kind::EndZombieParent;
      end.finding_id = FindingId::Zombie;
      end.pids = {parent->pid};
      end.only_when_chosen = true;
      end.description = fmt::format("end PID {} ({}), the parent of zombie {}", parent->pid, parent->command(), pid);
      diagnosis.fixes.push_back(end);
    }
    diagnosis.findings.push_back(std::move(f));
  }
}

void check_blocked_processes(const Snapshot& snapshot, double settle_seconds, Diagnosis& diagnosis) {
  std::vector<pid_t> blocked;
  for (const auto& h : snapshot.holders) {
    if (h.linux_process->state == 'D') blocked.push_back(h.pid);
  }
  if (blocked.empty()) return;
  const std::string& proc_root = snapshot.table.options().proc_root;
  std::vector<std::optional<BlockedSample>> first;
  for (pid_t pid : blocked) first.push_back(sample_blocked(proc_root, pid));
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long long>(std::min(settle_seconds, 0.5) * 1000)));
  for (std::size_t i = 0; i < blocked.size(); ++i) {
    const pid_t pid = blocked[i];
    const HolderView& h = *snapshot.holder(pid);
    const BlockedIoDetails io = inspect_blocked_process(proc_root, pid);
    const auto second = sample_blocked(proc_root, pid);
    const bool stayed = first[i] && second && stayed_blocked(*first[i], *second);
    Finding f;
    f.id = FindingId::DState;
    f.severity = Severity::Warning;
    f.gpu = h.gpus.size() == 1 ? std::optional<unsigned>(h.gpus.front()) : std::nullopt;
    const std::string wchan = io.wchan.empty() ? h.linux_process->wchan : io.wchan;
    f.summary = fmt::format("PID {} ({}) holds GPU device files in uninterruptible sleep (D){}: no signal ends it until "
                            "that kernel call returns",
                            pid, h.linux_process->comm, wchan.empty() ? "" : " in " + wchan);
    if (io.blocked_since_seconds) {
      f.details.push_back(fmt::format("Blocked for {} (kernel scheduler statistics).", format_duration(*io.blocked_since_seconds)));
    } else if (stayed && second && first[i]) {
      f.details.push_back(fmt::format("It did not run at all during {:.1f} s of watching (no context switch).",
                                      second->taken_at_monotonic - first[i]->taken_at_monotonic));
    }
    EvidenceList mounts;
    for (const auto& m : io.network_mounts) {
      mounts.push_back(Evidence{{"mount_point", m.mount_point}, {"fs_type", m.fs_type}, {"source", m.source}});
      f.details.push_back(fmt::format("It has files on the network filesystem {} ({} from {}): a server that stopped "
                                      "answering is the usual cause.",
                                      m.mount_point, m.fs_type, m.source));
    }
    EvidenceList files;
    for (const auto& file : io.files) {
      files.push_back(Evidence{{"what", file.what}, {"path", file.path},
                       {"mount_point", file.mount ? EvidenceValue(file.mount->mount_point) : EvidenceValue(nullptr)},
                       {"fs_type", file.mount ? EvidenceValue(file.mount->fs_type) : EvidenceValue(nullptr)}});
    }
    f.evidence["pid"] = pid;
    f.evidence["command"] = h.linux_process->command();
    f.evidence["wchan"] = wchan;
    f.evidence["gpus"] = h.gpus;
    f.evidence["listed_by_driver"] = h.listed_by_driver;
    f.evidence["stayed_blocked"] = stayed;
    f.evidence["blocked_seconds"] = EvidenceValue(io.blocked_since_seconds);
    f.evidence["context_switches"] = EvidenceValue(io.context_switches);
    f.evidence["network_mounts"] = mounts;
    f.evidence["files"] = files;
    f.evidence["kernel_stack"] = EvidenceValue(io.kernel_stack);
    f.remedies.push_back({fmt::format("cat /proc/{}/stack", pid), Risk::None, "see the kernel call it waits in (root)"});
    // The user-space side, as `gpureap run --dump-on-hang` saves it: py-spy reads a Python
    // process's stacks without stopping it; gdb can attach only once the kernel call returns.
    if (looks_like_python(executable_basename(h.linux_process->exe))) {
      f.remedies.push_back({command_line(py_spy_command(pid, true)), Risk::None,
                            "see where the Python code waits, without stopping it"});
    } else {
      f.remedies.push_back({command_line(gdb_command(pid)), Risk::Low,
                            "the native stack once it leaves the kernel call (attaching waits until then)"});
    }
    for (const auto& m : io.network_mounts) {
      f.remedies.push_back({fmt::format("showmount -e {}", m.source.substr(0, m.source.find(':'))), Risk::None,
                            "check that the file server answers"});
    }
    f.remedies.push_back({fmt::format("gpureap kill {}", pid), Risk::Medium,
                          "queue SIGKILL: it takes effect the moment the kernel call returns"});
    for (const auto& m : io.network_mounts) {
      f.remedies.push_back({"umount -f -l " + m.mount_point, Risk::High,
                            "force the stuck mount away (unsaved data on it is lost)"});
    }
    f.remedies.push_back({"systemctl reboot", Risk::High, "the only way out when the kernel call never returns"});
    diagnosis.findings.push_back(std::move(f));
  }
}

}  // namespace gpureap
