// The configuration file (TOML): written by an administrator, but a wrong byte in it must
// give one clear error, never a crash (a text nested thousands deep included), and never lose
// a protected name.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "kill/kill_config.hpp"
#include "kill/toml_nesting.hpp"
#include "utf8.hpp"

namespace {

void check_raw(std::string_view text) {
  std::string error;
  const auto config = gpureap::parse_kill_config(text, "config.toml", error);
  // A text nested past the limit never reaches toml++, which recurses through it (the corpus's
  // deep_*.toml: table headers, dotted keys, arrays and inline tables 2,500 to 5,000 deep).
  if (gpureap::toml_too_deep(text)) FUZZ_CHECK(!config && error.find("nested deeper than") != std::string::npos);
  if (!config) {
    // One line for a person, naming the file, with no control byte of the input in it.
    FUZZ_CHECK(error.rfind("config.toml", 0) == 0);
    for (const char c : error) FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7F);
    return;
  }
  FUZZ_CHECK(config->path == "config.toml");
  for (const std::string& name : config->protect) FUZZ_CHECK(!name.empty());
}

// A TOML basic string holding `text` exactly (control characters as \uXXXX).
std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04X", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Any UTF-8 name an administrator protects is read back exactly.
void check_protected_name(std::string_view name) {
  if (name.empty() || !fuzz::valid_utf8(name)) return;
  const std::string text = "[kill]\nprotect = [" + toml_quote(name) + ", \"Xorg\"]\n";
  std::string error;
  const auto config = gpureap::parse_kill_config(text, "config.toml", error);
  FUZZ_CHECK(config.has_value());
  FUZZ_CHECK(config->protect.size() == 2 && config->protect[0] == name &&
             config->protect[1] == "Xorg");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_raw(text);
  check_protected_name(text);
  return 0;
}
