// /proc/<pid>/stat: any bytes, and any bytes as a process name (which the owner of the
// process chooses freely: spaces, ')', newlines).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "proc/proc_parse.hpp"

using gpureap::parse_stat;

namespace {

// What the parser returns can only come from the text it was given.
void check_raw(std::string_view text) {
  const auto fields = parse_stat(text);
  if (!fields) return;
  FUZZ_CHECK(fields->pid > 0);
  FUZZ_CHECK(fields->ppid >= 0 && fields->pgid >= 0 && fields->session >= 0);
  const std::size_t open = text.find('(');
  const std::size_t close = text.rfind(')');
  FUZZ_CHECK(open != std::string_view::npos && close != std::string_view::npos && open < close);
  FUZZ_CHECK(text.substr(open + 1, close - open - 1) == fields->comm);
  FUZZ_CHECK(text.substr(close + 1).find(fields->state) != std::string_view::npos);
}

// The kernel writes "<pid> (<comm>) <state> ..."; whatever the name holds, it comes back whole.
void check_hostile_name(std::string_view name) {
  std::string line = "4242 (";
  line.append(name);
  line.append(") S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 123456 1000 -2 "
              "18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
  const auto fields = parse_stat(line);
  FUZZ_CHECK(fields.has_value());
  FUZZ_CHECK(fields->comm == name);
  FUZZ_CHECK(fields->pid == 4242 && fields->ppid == 1 && fields->state == 'S');
  FUZZ_CHECK(fields->utime_ticks == 7 && fields->stime_ticks == 3);
  FUZZ_CHECK(fields->start_time_ticks == 123456 && fields->rss_pages == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_raw(text);
  check_hostile_name(text);
  return 0;
}
