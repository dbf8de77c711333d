// The kernel log as doctor reads it (/dev/kmsg records, dmesg, journalctl, a saved file):
// lines hold text users control, since the kernel echoes some of it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "doctor/kernel_log.hpp"
#include "doctor/xid_catalog.hpp"
#include "doctor/xid_event.hpp"
#include "fuzz_check.hpp"

namespace gpureap {
namespace {

void check_event(const XidEvent& e, std::string_view input) {
  FUZZ_CHECK(e.xid >= 1 && e.xid <= kMaxXid);
  if (e.pid) FUZZ_CHECK(*e.pid > 0);
  if (e.process_name) FUZZ_CHECK(e.process_name->find(", ") == std::string::npos);
  if (e.seconds_since_boot) {
    FUZZ_CHECK(std::isfinite(*e.seconds_since_boot) && *e.seconds_since_boot >= 0);
  }
  // Everything reported was in the input: the line (trimmed) and the message within it.
  FUZZ_CHECK(input.find(e.line) != std::string_view::npos);
  FUZZ_CHECK(e.line.find(e.message) != std::string::npos);
  describe_xid(e);  // the catalog takes any event
}

void check_log(std::string_view input) {
  const KernelLogRead read = scan_kernel_log_text(input, "fuzz");
  FUZZ_CHECK(!read.error);
  std::size_t newlines = 0;
  for (const char c : input) newlines += c == '\n';
  FUZZ_CHECK(read.lines_read <= newlines + 1);
  std::size_t previous = 0;
  for (const XidEvent& e : read.events) {
    FUZZ_CHECK(e.line_number > previous && e.line_number <= read.lines_read);
    previous = e.line_number;
    check_event(e, input);
  }
}

void check_line(std::string_view input) {
  if (const auto e = parse_xid_line(input)) check_event(*e, input);
}

// A bus id that parses prints as one that parses to the same device.
void check_pci(std::string_view input) {
  const auto pci = parse_pci_bus_id(input);
  if (!pci) return;
  const auto again = parse_pci_bus_id(pci_text(*pci));
  FUZZ_CHECK(again.has_value() && same_pci_device(*pci, *again));
}

// The process name in a driver line is the user's: it may not change the Xid, PCI or pid.
void check_hostile_name(std::string_view name) {
  if (name.find('\n') != std::string_view::npos) return;
  const std::string line = "[ 5678.901234] NVRM: Xid (PCI:0000:05:00): 79, pid=1173, name=" +
                           std::string(name) + ", GPU has fallen off the bus.";
  const auto e = parse_xid_line(line);
  FUZZ_CHECK(e.has_value());
  FUZZ_CHECK(e->xid == 79 && e->pid == 1173);
  FUZZ_CHECK(e->pci.domain == 0 && e->pci.bus == 5 && e->pci.device == 0);
  FUZZ_CHECK(e->seconds_since_boot && std::fabs(*e->seconds_since_boot - 5678.901234) < 1e-6);
}

}  // namespace
}  // namespace gpureap

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  gpureap::check_log(input);
  gpureap::check_line(input);
  gpureap::check_pci(input);
  gpureap::check_hostile_name(input);
  return 0;
}
