// /proc/<pid>/status: any bytes, and any bytes as the Name: line, escaped as the kernel does.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "proc/proc_parse.hpp"

using gpureap::parse_status;

namespace {

void check_raw(std::string_view text) {
  const auto fields = parse_status(text);
  if (!fields) return;
  FUZZ_CHECK(fields->name.size() <= text.size());
  for (const pid_t pid : fields->ns_pids) FUZZ_CHECK(pid > 0);
}

// proc_task_name() escapes only '\n' and '\\' in Name: (seq_escape_str with "\n\\").
std::string kernel_escape(std::string_view name) {
  std::string out;
  for (const char c : name) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += c;
    }
  }
  return out;
}

void check_hostile_name(std::string_view name) {
  const std::string text = "Name:\t" + kernel_escape(name) +
                           "\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t0\t0\t0\n"
                           "NSpid:\t77\t5\n";
  const auto fields = parse_status(text);
  FUZZ_CHECK(fields.has_value());
  FUZZ_CHECK(fields->name == name);
  FUZZ_CHECK(fields->real_uid == 1000 && fields->effective_uid == 0);
  FUZZ_CHECK(fields->ns_pids.size() == 2 && fields->ns_pids[0] == 77 && fields->ns_pids[1] == 5);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_raw(text);
  check_hostile_name(text);
  return 0;
}
