// What an Xid means and what a person should do about it: NVIDIA's Xid catalog, the k8s
// device plugin's list of application errors ({13, 31, 43, 45, 68}) and the exporters'
// critical set ({48, 62, 64, 74, 79, 95, 119, 120}). doctor turns these into findings.
#pragma once

#include <string>
#include <string_view>

#include "doctor/finding.hpp"
#include "doctor/xid_event.hpp"

namespace gpureap {

// The class of response an Xid calls for, from least to most disruptive where they compare.
enum class XidAction {
  ApplicationFault,  // the application erred; restart it, the GPU stays usable
  Secondary,         // follows an earlier error; look at that one
  ResetGpu,          // stop the GPU's processes and reset it
  PowerCycle,        // the GPU is gone from PCIe; only a node power cycle brings it back
  Informational,     // recorded for later; takes effect at the next reset
  Trend,             // nothing to do now; watch how often it happens
  CheckNvlink,       // an NVLink fault; check the links, then reset
  DrainAndReset,     // Xid 154: drain the work (and peer-to-peer traffic), then reset
  NodeReboot,        // Xid 154: the driver asks for a reboot of the node
  None,              // Xid 154: the driver no longer asks for anything
  Unknown,           // not in our table, or a 154 whose message we cannot read
};

// How serious an Xid of this action is: critical when the GPU needs a reset, a power cycle, a
// drain or its links checked; a warning for trends and what is not in the catalog; information
// for application faults. doctor's findings, the fleet view and the critical-Xid alert rule
// (deploy/prometheus/gpureap-alerts.yml) use this one split.
Severity xid_severity(XidAction action);

// "application-fault", "secondary", "reset-gpu", ... (stable; used in JSON output).
std::string_view xid_action_name(XidAction action);

struct XidInfo {
  unsigned xid = 0;
  std::string meaning;  // "GPU has fallen off the bus"
  XidAction action = XidAction::Unknown;
  std::string advice;  // one or two short sentences for a person
};

// The meaning and action of the event's Xid. For 154 the action is read from the message
// ("... to 0x1 (GPU Reset Required)"); a message cut short gives Unknown, never a guess.
XidInfo describe_xid(const XidEvent& event);

}  // namespace gpureap
