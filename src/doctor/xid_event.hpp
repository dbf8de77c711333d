// One NVIDIA Xid event read from one kernel log line, and the PCI location it names.
// Pure parsing, no I/O: kernel_log reads the lines, this interprets them, so tests can feed
// any text (truncated, garbled, hostile) and doctor can match events to NVML's GPUs.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpureap {

// Where a GPU sits on PCI. The Xid line names domain:bus:device only; NVML adds the function.
struct PciLocation {
  unsigned domain = 0, bus = 0, device = 0;
  std::optional<unsigned> function;
};

// NVML's bus id "00000000:05:00.0" (any case), the short "0000:05:00.0", or the Xid line's
// "0000:05:00" without a function; surrounding spaces are ignored. nullopt when malformed.
std::optional<PciLocation> parse_pci_bus_id(std::string_view text);

// The bus id as NVML and `nvidia-smi -i` take it: "00000000:3B:00.0" (function 0 when the
// Xid line gave none).
std::string nvidia_smi_bus_id(const PciLocation& pci);

// The same physical GPU: domain, bus and device equal (the function is ignored).
bool same_pci_device(const PciLocation& a, const PciLocation& b);

// "0000:05:00", the form the driver prints in Xid lines.
std::string pci_text(const PciLocation& pci);

// Xid numbers above this are not believed: the catalog ends far below it, and a corrupted
// line must not produce an event for a made-up error.
inline constexpr unsigned kMaxXid = 999;

struct XidEvent {
  PciLocation pci;
  std::optional<unsigned> gpu_instance, compute_instance;  // MIG: " GPU-I:02 GPU-CI:01"
  unsigned xid = 0;                                        // 1..kMaxXid
  std::optional<int> pid;                   // pid=1173; absent for pid='<unknown>' or none
  std::optional<std::string> process_name;  // name=python3; absent for name=<unknown>
  std::string message;                      // the text after xid/pid/name
  // The timestamp as the log had it: "[ 5678.901234]", "[Sun Nov 29 18:29:40 2026]",
  // "Nov 29 18:29:40", "2026-11-29T18:29:40+0000"; for a /dev/kmsg record the usec field in
  // dmesg's form. "" when the line has none.
  std::string time_text;
  std::optional<double> seconds_since_boot;  // from the kmsg usec field or dmesg's "[ 1.5]"
  std::string line;                          // the whole raw line, trimmed
  std::size_t line_number = 0;               // 1-based within its source; 0 when unknown
};

// One log line in any of the formats kernel_log reads (kmsg record, dmesg, dmesg -T,
// journalctl -k, journalctl -o short-iso, or the bare driver text). nullopt when the line
// holds no complete Xid report, or holds it anywhere but where the kernel's message starts
// (after the record header, time or "host kernel:"), or is a /dev/kmsg record of another
// facility than the kernel's: only the driver can write a real one. A field the line does not hold reliably (a number cut short
// by truncation, an unparsable pid) is left empty rather than guessed.
std::optional<XidEvent> parse_xid_line(std::string_view line);

}  // namespace gpureap
