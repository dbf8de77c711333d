#include "doctor/xid_event.hpp"

#include <cstdint>
#include <limits>

#include <fmt/format.h>

namespace gpureap {
namespace {

constexpr std::string_view kMarker = "NVRM: Xid";

constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }
constexpr bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
constexpr bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

constexpr int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

void skip_spaces(std::string_view& text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
}

// Between min_digits and max_digits hex digits; advances past them. The limits keep the
// value within unsigned and reject truncated fields ("05:0" is not a device).
bool take_hex(std::string_view& text, std::size_t min_digits, std::size_t max_digits,
              unsigned& out) {
  unsigned value = 0;
  std::size_t i = 0;
  for (; i < text.size() && i < max_digits && hex_value(text[i]) >= 0; ++i) {
    value = value * 16 + static_cast<unsigned>(hex_value(text[i]));
  }
  if (i < min_digits || (i < text.size() && hex_value(text[i]) >= 0)) return false;
  out = value;
  text.remove_prefix(i);
  return true;
}

// A decimal number that fits in uint64; advances past it. False on no digit or overflow.
bool take_decimal(std::string_view& text, std::uint64_t& out) {
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (max - digit) / 10) return false;
    value = value * 10 + digit;
  }
  if (i == 0) return false;
  out = value;
  text.remove_prefix(i);
  return true;
}

// " 5678.901234" (the inside of dmesg's brackets) as seconds; nullopt unless all of it is.
std::optional<double> parse_uptime(std::string_view text) {
  skip_spaces(text);
  std::uint64_t whole = 0, fraction = 0;
  if (text.size() > 32 || !take_decimal(text, whole) || text.empty() || text.front() != '.')
    return std::nullopt;
  text.remove_prefix(1);
  const std::size_t digits = text.size();
  if (digits == 0 || digits > 9 || !take_decimal(text, fraction) || !text.empty())
    return std::nullopt;
  double scale = 1;
  for (std::size_t i = 0; i < digits; ++i) scale *= 10;
  return static_cast<double>(whole) + static_cast<double>(fraction) / scale;
}

// "Sun Nov 29 18:29:40 2026", loosely: letters first, then only letters, digits, ':' and ' '.
bool looks_like_date(std::string_view text) {
  if (text.size() < 15 || text.size() > 40 || !is_alpha(text.front())) return false;
  bool colon = false;
  for (const char c : text) {
    if (c == ':') colon = true;
    if (!is_alpha(c) && !is_digit(c) && c != ':' && c != ' ') return false;
  }
  return colon;
}

bool is_month(std::string_view text) {
  for (const std::string_view m :
       {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}) {
    if (text == m) return true;
  }
  return false;
}

// journalctl's "Nov 29 18:29:40" (or "Nov  9 18:29:40.123456"); its length, or 0.
std::size_t syslog_time_length(std::string_view text) {
  if (text.size() < 15 || !is_month(text.substr(0, 3)) || text[3] != ' ') return 0;
  std::size_t i = 4;
  if (text[i] == ' ') ++i;
  if (!is_digit(text[i])) return 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  if (i + 9 > text.size() || text[i] != ' ') return 0;
  const std::string_view clock = text.substr(i + 1, 8);
  for (std::size_t k = 0; k < 8; ++k) {
    if ((k == 2 || k == 5) ? clock[k] != ':' : !is_digit(clock[k])) return 0;
  }
  i += 9;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
  }
  return i;
}

// "2026-11-29T18:29:40+0000" and the other ISO 8601 forms: the first token, or 0.
std::size_t iso_time_length(std::string_view text) {
  if (text.size() < 11) return 0;
  for (std::size_t k = 0; k < 10; ++k) {
    if ((k == 4 || k == 7) ? text[k] != '-' : !is_digit(text[k])) return 0;
  }
  if (text[10] != 'T' && text[10] != ' ') return 0;
  const std::size_t end = text.find(' ', 11);
  return end == std::string_view::npos ? text.size() : end;
}

// A /dev/kmsg header "6,1234,5678901,-;" (priority,seq,usec,flags[,more];): the usec field.
std::optional<std::uint64_t> take_kmsg_header(std::string_view& text) {
  std::string_view rest = text;
  std::uint64_t priority = 0, seq = 0, usec = 0;
  if (!take_decimal(rest, priority) || rest.empty() || rest.front() != ',') return std::nullopt;
  rest.remove_prefix(1);
  if (!take_decimal(rest, seq) || rest.empty() || rest.front() != ',') return std::nullopt;
  rest.remove_prefix(1);
  if (!take_decimal(rest, usec) || rest.empty() || rest.front() != ',') return std::nullopt;
  const std::size_t semicolon = rest.find(';');
  if (semicolon == std::string_view::npos || semicolon > 64) return std::nullopt;
  text = rest.substr(semicolon + 1);
  return usec;
}

// Fills time_text and seconds_since_boot from what precedes "NVRM:".
void read_timestamp(std::string_view prefix, XidEvent& event) {
  if (const auto usec = take_kmsg_header(prefix)) {
    event.seconds_since_boot = static_cast<double>(*usec) / 1e6;
    event.time_text = fmt::format("[{:5}.{:06}]", *usec / 1000000, *usec % 1000000);
    return;
  }
  if (!prefix.empty() && prefix.front() == '[') {
    const std::size_t close = prefix.find(']');
    if (close != std::string_view::npos) {
      const std::string_view inside = prefix.substr(1, close - 1);
      if (const auto seconds = parse_uptime(inside)) {
        event.seconds_since_boot = seconds;
        event.time_text = std::string(prefix.substr(0, close + 1));
        return;
      }
      if (looks_like_date(inside)) event.time_text = std::string(prefix.substr(0, close + 1));
      prefix.remove_prefix(close + 1);
    }
  } else if (const std::size_t n = syslog_time_length(prefix); n > 0) {
    event.time_text = std::string(prefix.substr(0, n));
    prefix.remove_prefix(n);
  } else if (const std::size_t iso = iso_time_length(prefix); iso > 0) {
    event.time_text = std::string(prefix.substr(0, iso));
    prefix.remove_prefix(iso);
  }
  // kern.log and some journals keep the kernel's own "[ 5678.901234]" after "kernel: ".
  for (std::size_t open = prefix.find('['); open != std::string_view::npos;
       open = prefix.find('[', open + 1)) {
    const std::size_t close = prefix.find(']', open);
    if (close == std::string_view::npos) break;
    if (const auto seconds = parse_uptime(prefix.substr(open + 1, close - open - 1))) {
      event.seconds_since_boot = seconds;
      if (event.time_text.empty())
        event.time_text = std::string(prefix.substr(open, close - open + 1));
      break;
    }
  }
}

// "(PCI:0000:3b:00 GPU-I:02 GPU-CI:01)" without its parentheses.
bool parse_location(std::string_view inside, XidEvent& event) {
  skip_spaces(inside);
  const std::size_t space = inside.find(' ');
  std::string_view pci = inside.substr(0, space);
  if (pci.substr(0, 4) == "PCI:") pci.remove_prefix(4);
  const auto location = parse_pci_bus_id(pci);
  if (!location) return false;
  event.pci = *location;
  inside.remove_prefix(space == std::string_view::npos ? inside.size() : space);
  while (!inside.empty()) {
    skip_spaces(inside);
    const std::size_t end = inside.find(' ');
    std::string_view token = inside.substr(0, end);
    inside.remove_prefix(end == std::string_view::npos ? inside.size() : end);
    std::optional<unsigned>* slot = nullptr;
    if (token.substr(0, 6) == "GPU-I:") {
      slot = &event.gpu_instance;
      token.remove_prefix(6);
    } else if (token.substr(0, 7) == "GPU-CI:") {
      slot = &event.compute_instance;
      token.remove_prefix(7);
    } else {
      continue;  // a token a newer driver may add: ignored, not guessed at
    }
    std::uint64_t id = 0;
    if (slot->has_value() || token.size() > 4 || !take_decimal(token, id) || !token.empty())
      return false;
    *slot = static_cast<unsigned>(id);
  }
  return true;
}

// The text after "NVRM: Xid": " (PCI:...): 79, pid=..., name=..., message".
std::optional<XidEvent> parse_report(std::string_view text) {
  XidEvent event;
  skip_spaces(text);
  if (text.empty() || text.front() != '(') return std::nullopt;
  const std::size_t close = text.find(')');
  if (close == std::string_view::npos || !parse_location(text.substr(1, close - 1), event))
    return std::nullopt;
  text.remove_prefix(close + 1);
  if (text.empty() || text.front() != ':') return std::nullopt;
  text.remove_prefix(1);
  skip_spaces(text);
  // The number must end in the driver's ',': "7" cut from "79" would be another Xid.
  std::uint64_t xid = 0;
  if (text.size() > 0 && text.front() == '0') return std::nullopt;
  if (!take_decimal(text, xid) || xid == 0 || xid > kMaxXid || text.empty() || text.front() != ',')
    return std::nullopt;
  event.xid = static_cast<unsigned>(xid);
  text.remove_prefix(1);
  skip_spaces(text);

  if (text.substr(0, 4) == "pid=") {
    text.remove_prefix(4);
    const std::size_t comma = text.find(',');
    std::string_view value = text.substr(0, comma);
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
    std::uint64_t pid = 0;
    // Without the ',' the number may be cut short, so it is not believed.
    if (comma != std::string_view::npos && take_decimal(value, pid) && value.empty() && pid > 0 &&
        pid <= static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
      event.pid = static_cast<int>(pid);
    skip_spaces(text);
  }
  if (text.substr(0, 5) == "name=") {
    text.remove_prefix(5);
    std::size_t end = text.find(", ");
    std::size_t next = end + 2;
    if (end == std::string_view::npos && !text.empty() && text.back() == ',') {
      end = text.size() - 1;
      next = text.size();
    }
    if (end == std::string_view::npos) {
      text = {};  // cut inside the name: neither the name nor a message is known
    } else {
      const std::string_view name = text.substr(0, end);
      if (!name.empty() && name != "<unknown>") event.process_name = std::string(name);
      text.remove_prefix(next);
    }
  }
  // "79, pi" or "pid=1, na": cut inside a field's key, so there is no message yet.
  if (!text.empty() &&
      (std::string_view("pid=").starts_with(text) || std::string_view("name=").starts_with(text)))
    text = {};
  event.message = std::string(trim(text));
  return event;
}

// A "[ 5678.901234]" (the kernel's own time) and the spaces after it, if text starts so.
void skip_uptime(std::string_view& text) {
  if (text.empty() || text.front() != '[') return;
  const std::size_t close = text.find(']');
  if (close == std::string_view::npos || !parse_uptime(text.substr(1, close - 1))) return;
  text.remove_prefix(close + 1);
  skip_spaces(text);
}

// "host kernel: " after a syslog or ISO time: the record is the kernel's.
bool take_host_kernel(std::string_view& text) {
  skip_spaces(text);
  const std::size_t space = text.find(' ');
  if (space == 0 || space == std::string_view::npos) return false;
  text.remove_prefix(space);
  skip_spaces(text);
  if (text.substr(0, 7) != "kernel:") return false;
  text.remove_prefix(7);
  skip_spaces(text);
  skip_uptime(text);
  return true;
}

// dmesg -x: "kern  :err   : " (facility, level); only the kernel facility counts.
bool take_dmesg_facility(std::string_view& text) {
  if (text.substr(0, 4) != "kern") return false;
  std::string_view rest = text.substr(4);
  skip_spaces(rest);
  if (rest.empty() || rest.front() != ':') return false;
  rest.remove_prefix(1);
  skip_spaces(rest);
  while (!rest.empty() && is_alpha(rest.front())) rest.remove_prefix(1);
  skip_spaces(rest);
  if (rest.empty() || rest.front() != ':') return false;
  rest.remove_prefix(1);
  skip_spaces(rest);
  skip_uptime(rest);
  text = rest;
  return true;
}

// Where the kernel's message starts in a log line: after a /dev/kmsg header (kernel facility
// only), a dmesg time, or a journal's "time host kernel:". nullopt for a line that is not
// recognisably the kernel's own: text a user controls cannot start a kernel message.
std::optional<std::size_t> kernel_message_start(std::string_view line) {
  std::string_view rest = line;
  std::uint64_t priority = 0;
  if (take_decimal(rest, priority) && !rest.empty() && rest.front() == ',') {
    rest = line;
    if (!take_kmsg_header(rest)) return std::nullopt;
    if ((priority >> 3) != 0) return std::nullopt;  // facility 0 is the kernel's; others are userspace's
    return line.size() - rest.size();
  }
  rest = line;
  if (!rest.empty() && rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view inside = rest.substr(1, close - 1);
    if (!parse_uptime(inside) && !looks_like_date(inside)) return std::nullopt;
    rest.remove_prefix(close + 1);
    skip_spaces(rest);
  } else if (const std::size_t n = syslog_time_length(rest); n > 0) {
    rest.remove_prefix(n);
    if (!take_host_kernel(rest)) return std::nullopt;
  } else if (const std::size_t iso = iso_time_length(rest); iso > 0) {
    rest.remove_prefix(iso);
    if (!take_host_kernel(rest)) return std::nullopt;
  } else {
    take_dmesg_facility(rest);  // else the line is the message itself (dmesg --notime)
  }
  return line.size() - rest.size();
}

}  // namespace

std::optional<PciLocation> parse_pci_bus_id(std::string_view text) {
  text = trim(text);
  PciLocation pci;
  unsigned function = 0;
  if (!take_hex(text, 4, 8, pci.domain) || text.empty() || text.front() != ':') return std::nullopt;
  text.remove_prefix(1);
  if (!take_hex(text, 2, 2, pci.bus) || text.empty() || text.front() != ':') return std::nullopt;
  text.remove_prefix(1);
  if (!take_hex(text, 2, 2, pci.device) || pci.device > 0x1f) return std::nullopt;
  if (!text.empty() && text.front() == '.') {
    text.remove_prefix(1);
    if (!take_hex(text, 1, 1, function) || function > 7) return std::nullopt;
    pci.function = function;
  }
  if (!text.empty()) return std::nullopt;
  return pci;
}

bool same_pci_device(const PciLocation& a, const PciLocation& b) {
  return a.domain == b.domain && a.bus == b.bus && a.device == b.device;
}

std::string nvidia_smi_bus_id(const PciLocation& pci) {
  return fmt::format("{:08X}:{:02X}:{:02X}.{:X}", pci.domain, pci.bus, pci.device, pci.function.value_or(0));
}

std::string pci_text(const PciLocation& pci) {
  return fmt::format("{:04x}:{:02x}:{:02x}", pci.domain, pci.bus, pci.device);
}

std::optional<XidEvent> parse_xid_line(std::string_view line) {
  line = trim(line);
  // Only the driver writes "NVRM: Xid" at the start of a kernel message; anywhere else it is
  // text someone else put there (a process name, a path the kernel echoes).
  const auto at = kernel_message_start(line);
  if (!at || line.substr(*at, kMarker.size()) != kMarker) return std::nullopt;
  auto event = parse_report(line.substr(*at + kMarker.size()));
  if (!event) return std::nullopt;
  read_timestamp(line.substr(0, *at), *event);
  event->line = std::string(line);
  return event;
}

}  // namespace gpureap
