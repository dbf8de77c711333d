// The terminal sanitiser: whatever bytes a process, the kernel or a file name supplies, what
// reaches the terminal is valid UTF-8 with no control character (C0, DEL, C1) nor invisible
// format character left in it.
// Built only when src/text/sanitize.hpp exists (fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "text/sanitize.hpp"
#include "utf8.hpp"

namespace {

// Also the invisible format characters that would make two different names look the same.
bool is_control(char32_t cp) {
  return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x00AD || (cp >= 0x200B && cp <= 0x200F) ||
         (cp >= 0x2060 && cp <= 0x2064) || cp == 0xFEFF || (cp >= 0xE0001 && cp <= 0xE007F);
}

bool plain(std::string_view text) {
  for (const char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == ' ' || c == '.' || c == '/' || c == '_' || c == '-' || c == '=';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string output = gpureap::sanitize_for_terminal(input);
  bool control = false;
  FUZZ_CHECK(fuzz::for_each_code_point(output, [&](char32_t cp) { control |= is_control(cp); }));
  FUZZ_CHECK(!control);
  // Ordinary text is left alone.
  if (plain(input)) FUZZ_CHECK(output == input);
  return 0;
}
