// Xid events from the kernel log, grouped per GPU and Xid, mapped from the PCI location the
// driver printed to the NVML index, with what they mean and what to do.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <tuple>

#include "doctor/doctor.hpp"
#include "doctor/event_age.hpp"
#include "doctor/ipc_removal.hpp"
#include "doctor/kernel_log.hpp"
#include "doctor/reset_readiness.hpp"
#include "doctor/xid_catalog.hpp"
#include "doctor/xid_event.hpp"

namespace gpureap {
namespace {

Evidence event_json(const XidEvent& e, std::optional<double> age) {
  return {{"time", e.time_text},
          {"age_seconds", EvidenceValue(age)},
          {"seconds_since_boot", EvidenceValue(e.seconds_since_boot)},
          {"line_number", e.line_number},
          {"line", e.line}};
}

// gpu_arg names the GPU as `nvidia-smi -i` and `gpureap kill --gpu` take it.
void add_remedies(Finding& f, const XidInfo& info, const std::string& gpu_arg) {
  switch (info.action) {
    case XidAction::ApplicationFault:
      f.remedies.push_back({"", Risk::None, "restart the application; the GPU itself stays usable"});
      break;
    case XidAction::Secondary:
      f.remedies.push_back({"", Risk::None, "look at the Xid that came before it on this GPU"});
      break;
    case XidAction::Trend:
      f.remedies.push_back({"nvidia-smi -q -d ECC" + (" -i " + gpu_arg), Risk::None, "watch the error counters over time"});
      break;
    case XidAction::Informational:
      f.remedies.push_back({"nvidia-smi -q -d ROW_REMAPPER" + (" -i " + gpu_arg), Risk::None,
                            "see the pending remaps; they take effect at the next reset"});
      break;
    case XidAction::CheckNvlink:
      f.remedies.push_back({"nvidia-smi nvlink -s" + (" -i " + gpu_arg), Risk::None, "check the state of each link"});
      [[fallthrough]];
    case XidAction::ResetGpu:
    case XidAction::DrainAndReset:
      f.remedies.push_back({"gpureap kill --gpu " + gpu_arg, Risk::Medium,
                            "end the GPU's processes (drain it from the scheduler first)"});
      f.remedies.push_back({"nvidia-smi -r" + (" -i " + gpu_arg), Risk::High, "reset the GPU once nothing uses it"});
      break;
    case XidAction::PowerCycle:
    case XidAction::NodeReboot:
      f.remedies.push_back({"scontrol update nodename=$(hostname -s) state=drain reason=\"Xid " +
                                std::to_string(info.xid) + "\"",
                            Risk::Low, "on a Slurm cluster: keep new jobs off this node"});
      f.remedies.push_back({"systemctl reboot", Risk::High,
                            info.action == XidAction::PowerCycle ? "power-cycle the node: a reset cannot bring the GPU back"
                                                                 : "reboot the node, as the driver asks"});
      break;
    case XidAction::None:
      break;
    case XidAction::Unknown:
      f.remedies.push_back({"", Risk::None, "look the Xid up in NVIDIA's Xid catalog (docs.nvidia.com, \"Xid errors\")"});
      break;
  }
}

}  // namespace

std::optional<unsigned> gpu_at_pci(const Snapshot& snapshot, const PciLocation& pci) {
  for (const auto& gpu : snapshot.gpus) {
    const auto location = parse_pci_bus_id(gpu.reading.pci_bus_id);
    if (location && same_pci_device(*location, pci)) return gpu.reading.index;
  }
  return std::nullopt;
}

// What is kept of the events of one (GPU, Xid): their count, the first and the last, and the
// PIDs they named (a bounded number): the log is streamed, never held.
struct XidGroup {
  std::size_t count = 0;
  XidEvent first, last;
  std::optional<double> first_age, last_age;
  std::vector<std::pair<int, std::optional<std::string>>> pids;  // distinct, in log order
};
constexpr std::size_t kMaxPidsPerGroup = 32;
constexpr std::size_t kMaxXidGroups = 4096;  // distinct (PCI, Xid): a real host has a handful

namespace {

// The log's events folded into groups as they stream by, with what was left out and why.
struct XidTally {
  XidTally(const DoctorOptions& doctor_options, bool live_log, std::optional<double> uptime_s, double now_s)
      : options(doctor_options), live(live_log), uptime(uptime_s), now(now_s) {}

  const DoctorOptions& options;
  // Age where it can be known: the live log counts from boot; a saved one only from an
  // absolute time with its zone.
  bool live;
  std::optional<double> uptime;
  double now;
  std::size_t ignored = 0, unknown_age = 0, dropped_groups = 0;
  // (PCI, Xid) → what is kept of its events; 154 keeps only the latest per GPU: it states the
  // current request.
  std::map<std::tuple<unsigned, unsigned, unsigned, unsigned>, XidGroup> groups;

  std::optional<double> age_of(const XidEvent& e) const {
    if (live && uptime && e.seconds_since_boot) return std::max(0.0, *uptime - *e.seconds_since_boot);
    if (const auto when = parse_iso8601(e.time_text)) return std::max(0.0, now - *when);
    return std::nullopt;
  }

  void add(XidEvent&& e) {
    const std::optional<double> age = age_of(e);
    if (options.xid_max_age_seconds) {
      if (!age) ++unknown_age;
      if (age && *age > *options.xid_max_age_seconds) {
        ++ignored;
        return;
      }
    }
    const auto key = std::make_tuple(e.pci.domain, e.pci.bus, e.pci.device, e.xid);
    auto it = groups.find(key);
    if (it == groups.end()) {
      if (groups.size() >= kMaxXidGroups) {
        ++dropped_groups;
        return;
      }
      it = groups.emplace(key, XidGroup{}).first;
    }
    XidGroup& group = it->second;
    if (e.xid == 154) group = XidGroup{};
    if (e.pid && group.pids.size() < kMaxPidsPerGroup &&
        std::none_of(group.pids.begin(), group.pids.end(), [&](const auto& p) { return p.first == *e.pid; })) {
      group.pids.emplace_back(*e.pid, e.process_name);
    }
    if (group.count++ == 0) {
      group.first = e;
      group.first_age = age;
    }
    group.last = std::move(e);
    group.last_age = age;
  }
};

// Counts and line numbers are those of the lines read: the notes say what was not.
void note_log_gaps(const KernelLogRead& log, Diagnosis& diagnosis) {
  if (log.bytes_unread > 0) {
    diagnosis.notes.push_back(fmt::format("Xid events counted in part of the log only: {} (reading stopped after {:.0f} s)",
                                          unread_part_text(log), kKernelLogReadSeconds));
  }
  if (log.truncated) {
    diagnosis.notes.push_back("the kernel log had overwritten older records: earlier Xid events may be missing");
  }
}

// One (GPU, Xid) group as a finding: what it means, the PIDs it named and what to do.
Finding xid_finding(const Snapshot& snapshot, const XidGroup& group, const std::string& source) {
  const std::string& proc_root = snapshot.table.options().proc_root;
  const XidEvent& last = group.last;
  const XidInfo info = describe_xid(last);
  Finding f;
  f.id = FindingId::Xid;
  f.severity = xid_severity(info.action);
  f.gpu = gpu_at_pci(snapshot, last.pci);
  const std::string where = f.gpu ? fmt::format("GPU {} ({})", *f.gpu, pci_text(last.pci)) : "PCI " + pci_text(last.pci);
  f.summary = fmt::format("{}: Xid {} ({}){}: {}", where, last.xid, info.meaning,
                          group.count > 1 ? fmt::format(", {} times", group.count) : std::string(), info.advice);
  f.details.push_back("Last: " + last.line);
  EvidenceList pids;
  for (const auto& [pid, name] : group.pids) {
    const bool alive = process_exists(pid, proc_root);
    pids.push_back(Evidence{{"pid", pid}, {"name", EvidenceValue(name)}, {"running", alive}});
    f.details.push_back(fmt::format("Named PID {} ({}){}", pid, name.value_or("?"),
                                    alive ? " is still running (PID numbers are reused: check it)" : " is gone"));
  }
  f.evidence["xid"] = last.xid;
  f.evidence["meaning"] = info.meaning;
  f.evidence["action"] = xid_action_name(info.action);
  f.evidence["pci"] = pci_text(last.pci);
  f.evidence["gpu_instance"] = EvidenceValue(last.gpu_instance);
  f.evidence["compute_instance"] = EvidenceValue(last.compute_instance);
  f.evidence["count"] = group.count;
  f.evidence["first"] = event_json(group.first, group.first_age);
  f.evidence["last"] = event_json(last, group.last_age);
  f.evidence["pids"] = pids;
  f.evidence["source"] = source;
  // By UUID (the GPU the driver still lists at that address) or by the event's own bus id: the
  // index the advice would otherwise name shifts when a GPU falls off the bus, and a command
  // without one (nvidia-smi -r) acts on every GPU.
  const GpuView* gpu = f.gpu ? snapshot.gpu_by_index(*f.gpu) : nullptr;
  add_remedies(f, info, gpu != nullptr ? gpu_device_id(gpu->reading) : nvidia_smi_bus_id(last.pci));
  return f;
}

// What the tally left out: too old, beyond the group bound, or of unknown age.
void note_left_out(const XidTally& tally, Diagnosis& diagnosis) {
  if (tally.ignored > 0) {
    diagnosis.notes.push_back(fmt::format("{} Xid event(s) older than --since were ignored", tally.ignored));
  }
  if (tally.dropped_groups > 0) {
    diagnosis.notes.push_back(fmt::format("{} Xid event(s) not counted: the log names more than {} distinct (GPU, Xid) pairs",
                                          tally.dropped_groups, kMaxXidGroups));
  }
  if (tally.unknown_age > 0) {
    diagnosis.notes.push_back(fmt::format(
        "{} Xid event(s) of unknown age were kept: their log line has no time with a zone (for a saved log, "
        "use journalctl -k -o short-iso)",
        tally.unknown_age));
  }
}

}  // namespace

void check_kernel_log(const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis) {
  if (options.no_kernel_log) return;
  const bool live = options.kernel_log.empty();
  const std::string& root = snapshot.table.options().proc_root;
  const auto uptime = live ? uptime_seconds(root.c_str()) : std::nullopt;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  XidTally tally(options, live, uptime, now);
  const XidSink sink = [&](XidEvent&& e) { tally.add(std::move(e)); };
  const KernelLogRead log =
      options.kernel_log.empty() ? read_kmsg(options.kmsg_path, sink) : read_kernel_log_file(options.kernel_log, sink);
  if (log.error) {
    diagnosis.notes.push_back("Xid events not checked: " + *log.error);
    return;
  }
  note_log_gaps(log, diagnosis);
  for (const auto& [key, group] : tally.groups) diagnosis.findings.push_back(xid_finding(snapshot, group, log.source));
  note_left_out(tally, diagnosis);
}

}  // namespace gpureap
