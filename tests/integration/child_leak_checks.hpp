#pragma once
// Which programs the integration tests start are leak-checked at their exit.
// LeakSanitizer's check at a sanitized program's exit scans its globals: for gpureap ~60 ms of
// CPU and ~2,700 page faults, more than the rest of a `--version`, and the tests start gpureap
// ~900 times (docs/performance.md). A one-shot command's leak ends at its exit; a leak costs
// users in what runs on (watch, export), and the library's code is leak-checked in the unit
// tests. So the programs these tests start run without the check (detect_leaks=0 is appended to
// the ASAN_OPTIONS they inherit, once, before any test runs), except those given
// asan_options_with_leak_check(): the daemons (BackgroundWatch, ExportServer) and the
// LeakChecks suite, which runs each command once with it.
#include <string>

namespace gpureap::test {

// The ASAN_OPTIONS the tests were started with, then detect_leaks=1.
std::string asan_options_with_leak_check();

}  // namespace gpureap::test
