#include "doctor/xid_catalog.hpp"

#include <array>
#include <optional>

#include <fmt/format.h>

namespace gpureap {
namespace {

struct Entry {
  unsigned xid;
  std::string_view meaning;
  XidAction action;
  std::string_view advice;
};

constexpr std::array kCatalog{
    Entry{13, "Graphics engine exception", XidAction::ApplicationFault,
          "An application fault; restart the job. The GPU stays usable."},
    Entry{31, "GPU memory page fault", XidAction::ApplicationFault,
          "The application touched memory it does not own (a bug or bad input); restart the "
          "job. The GPU stays usable."},
    Entry{43, "GPU stopped processing", XidAction::Secondary,
          "Follows another error that stopped the application; look at the Xid before it. "
          "Usually nothing to do."},
    Entry{45, "Preemptive cleanup after earlier errors", XidAction::Secondary,
          "The driver cleaned up after an earlier error or a killed process; look at the "
          "earlier Xid."},
    Entry{48, "Double-bit ECC error", XidAction::ResetGpu,
          "Uncorrectable memory error; stop the GPU's processes and reset it. With Xid 63 or "
          "64 next to it, drain the GPU first, then reset."},
    Entry{62, "Internal micro-controller halt", XidAction::ResetGpu,
          "Stop the GPU's processes and reset the GPU."},
    Entry{63, "Row remapping / page retirement recorded", XidAction::Informational,
          "The bad memory is retired at the next GPU reset; schedule one when the GPU is idle."},
    Entry{64, "Row remapping / page retirement failed", XidAction::ResetGpu,
          "Stop the GPU's processes and reset it; if it happens again the GPU needs service."},
    Entry{68, "Video processor exception", XidAction::ApplicationFault,
          "A video decode/encode fault of the application; restart the job."},
    Entry{74, "NVLink error", XidAction::CheckNvlink,
          "Check the links (nvidia-smi nvlink -s, -e) and reset the GPU; errors that stay "
          "point at the NVLink hardware."},
    Entry{79, "GPU has fallen off the bus", XidAction::PowerCycle,
          "The GPU no longer answers on PCIe; a GPU reset cannot help. Drain the node and "
          "power-cycle it."},
    Entry{92, "High single-bit ECC error rate", XidAction::Trend,
          "Corrected errors; nothing to do now. Watch the count (nvidia-smi -q -d ECC) and "
          "plan service if it grows."},
    Entry{94, "Contained ECC error", XidAction::ApplicationFault,
          "An uncorrectable memory error was contained to one application; restart it. The "
          "GPU stays usable."},
    Entry{95, "Uncontained ECC error", XidAction::ResetGpu,
          "An uncorrectable memory error may have hit several applications; stop all of the "
          "GPU's processes and reset it."},
    Entry{119, "GSP RPC timeout", XidAction::ResetGpu,
          "The GPU System Processor stopped answering; stop the GPU's processes and reset it "
          "(reboot the node if the reset fails)."},
    Entry{120, "GSP error", XidAction::ResetGpu,
          "The GPU System Processor failed; stop the GPU's processes and reset it (reboot the "
          "node if the reset fails)."},
};

constexpr std::string_view kCatalogHint =
    "Look it up in NVIDIA's Xid catalog (https://docs.nvidia.com/deploy/xid-errors/).";

struct Recovery {
  XidAction action;
  std::string_view advice;
};

// The driver's names for the recovery actions (nvmlDeviceGpuRecoveryAction_t 0..4, 7).
std::optional<Recovery> recovery_by_name(std::string_view name) {
  if (name == "None") return Recovery{XidAction::None, "The driver no longer asks for recovery."};
  if (name == "GPU Reset Required")
    return Recovery{XidAction::ResetGpu, "Stop the GPU's processes and reset it (nvidia-smi -r)."};
  if (name == "Node Reboot Required")
    return Recovery{XidAction::NodeReboot,
                    "Drain the node and reboot it; a GPU reset is not enough."};
  if (name == "Drain P2P")
    return Recovery{XidAction::DrainAndReset,
                    "Drain the work that uses peer-to-peer (NVLink/PCIe P2P) on this GPU; reset "
                    "it when the driver asks."};
  if (name == "Drain and Reset")
    return Recovery{XidAction::DrainAndReset,
                    "Drain the GPU's work (peer-to-peer included), then reset it."};
  return std::nullopt;
}

std::optional<Recovery> recovery_by_number(unsigned value) {
  switch (value) {
    case 0: return recovery_by_name("None");
    case 1: return recovery_by_name("GPU Reset Required");
    case 2: return recovery_by_name("Node Reboot Required");
    case 3: return recovery_by_name("Drain P2P");
    case 4: return recovery_by_name("Drain and Reset");
    case 7: return Recovery{XidAction::NodeReboot, "Reboot the system."};
    default: return std::nullopt;
  }
}

// "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)": the new action.
// The name wins; the number counts only when it is complete (followed by more text).
std::optional<Recovery> recovery_from_message(std::string_view message) {
  constexpr std::string_view kTo = " to 0x";
  const std::size_t at = message.rfind(kTo);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = message.substr(at + kTo.size());
  unsigned value = 0;
  std::size_t digits = 0;
  for (; digits < rest.size() && digits < 8; ++digits) {
    const char c = rest[digits];
    const int v = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : -1;
    if (v < 0) break;
    value = value * 16 + static_cast<unsigned>(v);
  }
  const bool number_complete = digits > 0 && digits < rest.size() && rest[digits] == ' ';
  rest.remove_prefix(digits);
  if (rest.substr(0, 2) == " (") {
    const std::size_t close = rest.find(')');
    if (close != std::string_view::npos) {
      if (const auto by_name = recovery_by_name(rest.substr(2, close - 2))) return by_name;
    }
  }
  if (number_complete) return recovery_by_number(value);
  return std::nullopt;
}

}  // namespace

Severity xid_severity(XidAction action) {
  switch (action) {
    case XidAction::ResetGpu:
    case XidAction::PowerCycle:
    case XidAction::DrainAndReset:
    case XidAction::NodeReboot:
    case XidAction::CheckNvlink:
      return Severity::Critical;
    case XidAction::Trend:
    case XidAction::Informational:
    case XidAction::Unknown:
      return Severity::Warning;
    case XidAction::ApplicationFault:
    case XidAction::Secondary:
    case XidAction::None:
      return Severity::Info;
  }
  return Severity::Warning;
}

std::string_view xid_action_name(XidAction action) {
  switch (action) {
    case XidAction::ApplicationFault: return "application-fault";
    case XidAction::Secondary: return "secondary";
    case XidAction::ResetGpu: return "reset-gpu";
    case XidAction::PowerCycle: return "power-cycle";
    case XidAction::Informational: return "informational";
    case XidAction::Trend: return "trend";
    case XidAction::CheckNvlink: return "check-nvlink";
    case XidAction::DrainAndReset: return "drain-and-reset";
    case XidAction::NodeReboot: return "node-reboot";
    case XidAction::None: return "none";
    case XidAction::Unknown: return "unknown";
  }
  return "unknown";
}

XidInfo describe_xid(const XidEvent& event) {
  XidInfo info;
  info.xid = event.xid;
  if (event.xid == 154) {
    info.meaning = "GPU recovery action changed";
    if (const auto recovery = recovery_from_message(event.message)) {
      info.action = recovery->action;
      info.advice = std::string(recovery->advice);
    } else {
      info.action = XidAction::Unknown;
      info.advice = fmt::format(
          "The log line does not name a recovery action gpureap knows; "
          "read it and check nvidia-smi -q. {}",
          kCatalogHint);
    }
    return info;
  }
  for (const Entry& entry : kCatalog) {
    if (entry.xid == event.xid) {
      info.meaning = std::string(entry.meaning);
      info.action = entry.action;
      info.advice = std::string(entry.advice);
      return info;
    }
  }
  info.meaning = fmt::format("Xid {} (not in gpureap's table)", event.xid);
  info.action = XidAction::Unknown;
  info.advice = std::string(kCatalogHint);
  return info;
}

}  // namespace gpureap
