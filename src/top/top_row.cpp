#include "top/top_row.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

std::string container_text(const ProcessInfo& process) {
  if (!process.container) return {};
  return sanitize_for_terminal(container_words(*process.container));
}

// The Linux side of a row: the columns every kind of row shares.
void fill_from_process(TopRow& row, const ProcessInfo& process, CpuSampler& cpu, const RowContext& context) {
  row.key = {process.pid, process.start_time_ticks};
  if (process.ns_pids.size() > 1 && process.ns_pids.back() != process.pid) row.local_pid = process.ns_pids.back();
  row.user = sanitize_for_terminal(process.user);
  row.container = container_text(process);
  row.cpu_percent = cpu.sample(process, context.now);
  row.host_memory = process.rss_bytes;
  row.state = process.state;
  row.age_seconds = process.elapsed_seconds;
  row.command = sanitize_for_terminal(process.command());
  if (context.policy == nullptr) return;
  if (!may_signal(process, *context.policy)) {
    row.can_act = false;
    row.cannot_act = fmt::format("{}'s process: ending it needs root", row.user.empty() ? "another user" : row.user);
  } else if (auto pattern = context.policy->protect.match(process); pattern && !context.policy->force) {
    row.can_act = false;
    row.cannot_act = "protected (" + sanitize_for_terminal(*pattern) + ")";
  }
}

std::string pid_list(const std::vector<pid_t>& pids) {
  std::string text;
  for (pid_t pid : pids) text += fmt::format("{}{}", text.empty() ? "" : ",", pid);
  return text;
}

TopRow listed_row(const GpuProcessView& view, CpuSampler& cpu, const RowContext& context) {
  TopRow row;
  row.gpu = view.gpu_index;
  row.key.pid = static_cast<pid_t>(view.driver.pid);
  row.type = view.driver.types.label();
  row.gpu_memory = view.driver.used_memory;
  row.sm_percent = view.driver.sm_util_percent;
  const ProcessInfo* process = view.linux_process;
  if (process == nullptr) {
    if (!view.held_by.empty()) {
      row.kind = RowKind::Gone;
      row.role = "gone, kept by " + pid_list(view.held_by);
      row.command = "(exited)";
    } else {
      row.kind = RowKind::Foreign;
      row.role = "foreign";
      row.command = "(another PID namespace, or exited)";
      row.can_act = false;
      row.cannot_act = "foreign: not a process in this PID namespace";
    }
    return row;
  }
  if (view.identity == Identity::Mismatch) {
    // The process here is a stranger that got the number: its columns would mislead.
    row.kind = RowKind::Mismatch;
    row.key.start_time_ticks = process->start_time_ticks;
    row.role = "mismatch";
    row.command = "(this PID here is another process: " + sanitize_for_terminal(process->command()) + ")";
    row.can_act = false;
    row.cannot_act = "mismatch: the PID here is not the GPU process";
    return row;
  }
  fill_from_process(row, *process, cpu, context);
  if (view.identity == Identity::Unverified) row.role = "unverified";
  return row;
}

TopRow holder_row(const HolderView& holder, std::optional<unsigned> gpu, CpuSampler& cpu, const RowContext& context) {
  TopRow row;
  row.gpu = gpu;
  fill_from_process(row, *holder.linux_process, cpu, context);
  switch (holder.role) {
    case HolderRole::GpuProcess:  // listed: shown by its driver row
    case HolderRole::Worker:
      row.kind = RowKind::Worker;
      row.parent = holder.listed_ancestor;
      row.role = holder.listed_ancestor ? fmt::format("worker of {}", *holder.listed_ancestor) : "worker";
      break;
    case HolderRole::Orphan:
      row.kind = RowKind::Orphan;
      if (holder.context_of) {
        row.parent = holder.context_of;
      } else if (!holder.evidence_pids.empty()) {
        row.parent = holder.evidence_pids.front();
      }
      row.role = row.parent ? fmt::format("orphan of PID {}", *row.parent) : "orphan: its job is over";
      break;
    case HolderRole::Client:
      row.kind = RowKind::Client;
      row.role = "client";
      break;
    case HolderRole::Unlisted:
      row.kind = RowKind::Unlisted;
      row.role = "unlisted";
      break;
  }
  return row;
}

// A DRM row for `pid` on the device at `index`: the Linux side when the process is visible.
TopRow drm_row(const Snapshot& snapshot, std::size_t index, pid_t pid, CpuSampler& cpu, const RowContext& context) {
  TopRow row;
  row.drm_gpu = index;
  row.key.pid = pid;
  if (const ProcessInfo* process = snapshot.table.find(pid)) {
    fill_from_process(row, *process, cpu, context);
  } else {
    row.command = "(not visible here)";
    row.can_act = false;
    row.cannot_act = "not a process in this PID namespace";
  }
  return row;
}

void add_drm_rows(const Snapshot& snapshot, CpuSampler& cpu, const RowContext& context, DrmEngineSampler* engines,
                  std::vector<TopRow>& rows) {
  const auto& reading = snapshot.drm;
  for (std::size_t i = 0; i < reading.devices.size(); ++i) {
    const auto& device = reading.devices[i];
    std::vector<pid_t> with_client;
    for (const auto* client : reading.clients.clients_of(device.pci_address)) {
      const auto pids = client->pids();
      TopRow row = drm_row(snapshot, i, pids.front(), cpu, context);
      row.kind = RowKind::DrmClient;
      row.type = "DRM";
      row.gpu_memory = drm::device_memory_bytes(client->stats);
      if (engines != nullptr) row.sm_percent = engines->sample(*client, context.now);
      if (pids.size() > 1) {
        std::vector<pid_t> others(pids.begin() + 1, pids.end());
        row.role = "client shared with " + pid_list(others);
      }
      rows.push_back(std::move(row));
      with_client.insert(with_client.end(), pids.begin(), pids.end());
    }
    for (const auto& process : reading.kfd_processes) {
      if (std::find(with_client.begin(), with_client.end(), process.pid) != with_client.end()) continue;
      const auto vram = drm::kfd_vram_on(reading, process, device.pci_address);
      if (!vram) continue;
      TopRow row = drm_row(snapshot, i, process.pid, cpu, context);
      row.kind = RowKind::Kfd;
      row.type = "KFD";
      row.gpu_memory = vram;
      rows.push_back(std::move(row));
    }
  }
}

}  // namespace

std::vector<TopRow> build_rows(const Snapshot& snapshot, CpuSampler& cpu, const RowContext& context,
                               DrmEngineSampler* engines) {
  std::vector<TopRow> rows;
  for (const auto& view : snapshot.processes) rows.push_back(listed_row(view, cpu, context));
  for (const auto& holder : snapshot.holders) {
    if (holder.listed_by_driver) continue;
    if (holder.gpus.empty()) {
      rows.push_back(holder_row(holder, std::nullopt, cpu, context));
      continue;
    }
    for (unsigned gpu : holder.gpus) rows.push_back(holder_row(holder, gpu, cpu, context));
  }
  add_drm_rows(snapshot, cpu, context, engines, rows);
  cpu.end_round();
  if (engines != nullptr) engines->end_round();
  return rows;
}

}  // namespace gpureap
