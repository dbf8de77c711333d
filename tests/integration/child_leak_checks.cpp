#include "child_leak_checks.hpp"

#include <cstdlib>

namespace gpureap::test {
namespace {

// Read and rewritten while the program's globals are made, before main and any test: this
// program's own options were read by the sanitizer's start, before either.
const std::string g_started_with = [] {
  const char* value = std::getenv("ASAN_OPTIONS");
  return std::string(value == nullptr ? "" : value);
}();

std::string with_detect_leaks(const char* setting) {
  return g_started_with.empty() ? std::string(setting) : g_started_with + ":" + setting;
}

[[maybe_unused]] const bool g_children_without_leak_check =
    setenv("ASAN_OPTIONS", with_detect_leaks("detect_leaks=0").c_str(), 1) == 0;

}  // namespace

std::string asan_options_with_leak_check() { return with_detect_leaks("detect_leaks=1"); }

}  // namespace gpureap::test
