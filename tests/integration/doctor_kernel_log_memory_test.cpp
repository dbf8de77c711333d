// doctor --kernel-log streams the log: what it keeps of Xid events is a count and the first and
// last per (GPU, Xid), so its memory does not grow with the number of Xid lines.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>
#include <string>

#include <gtest/gtest.h>

#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

constexpr bool kAsan = kUnderAddressSanitizer;

// A log of `bytes` of Xid lines (two GPUs, three kinds), written quickly in large blocks.
std::string write_xid_log(const std::string& path, std::size_t bytes) {
  std::string block;
  for (int i = 0; block.size() < (1u << 20); ++i) {
    block += "[ " + std::to_string(1000 + i) + ".000001] NVRM: Xid (PCI:0000:" + (i % 2 ? "3b" : "5e") + ":00): " +
             (i % 3 == 0 ? "13" : i % 3 == 1 ? "31" : "43") + ", pid=" + std::to_string(4000 + i % 50) +
             ", name=python3, Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted\n";
  }
  std::ofstream out(path, std::ios::binary);
  for (std::size_t written = 0; written < bytes; written += block.size()) out << block;
  return path;
}

// The peak RSS (KiB) of `doctor --kernel-log path`, as /usr/bin/time reports it, and its stdout.
std::pair<long, std::string> doctor_peak_kib(const std::string& dir, const std::string& log, const std::vector<std::string>& prefix) {
  std::vector<std::string> argv{"/usr/bin/time", "-f", "%M", "-o", dir + "/peak"};
  argv.insert(argv.end(), prefix.begin(), prefix.end());
  for (const std::string& a : {gpureap_binary(), std::string("doctor"), std::string("--kernel-log"), log}) argv.push_back(a);
  SpawnOptions options;
  options.env = {{"GPUREAP_NVML_LIBRARY", "/nonexistent"},
                 // ASan keeps freed memory in quarantine (256 MiB by default): without it the peak is
                 // what the program holds.
                 {"ASAN_OPTIONS", "quarantine_size_mb=0:detect_leaks=0"}};
  const auto r = run_command(argv, options, 60000);
  // "Command exited with non-zero status N" comes first when doctor found something.
  std::string text = read_text_file(dir + "/peak");
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return {std::stol("0" + text.substr(text.rfind('\n') + 1)), r.out};
}

TEST(DoctorKernelLog, MemoryStaysBoundedHoweverManyXidLinesTheLogHolds) {
  char tmpl[] = "/tmp/gpureap-xidlog-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  // Under ASan the parse runs at a twentieth of its speed and an address-space limit cannot be
  // set (its shadow maps terabytes): 2 MiB (some 11,000 Xid lines, enough for a reader that
  // keeps every event to grow by tens of MiB) is compared with 100 KiB. Other builds read
  // 100 MiB under a 256 MiB address-space limit (prlimit --as) and must peak under 32 MiB.
  const std::size_t big_bytes = kAsan ? (2u << 20) : (100u << 20);
  const std::string small = write_xid_log(dir + "/small.log", 100u << 10);
  const std::string big = write_xid_log(dir + "/big.log", big_bytes);
  std::vector<std::string> limit;
  if (!kAsan) limit = {"/usr/bin/prlimit", "--as=" + std::to_string(256u << 20)};
  const auto [small_peak, small_out] = doctor_peak_kib(dir, small, limit);
  const auto [big_peak, big_out] = doctor_peak_kib(dir, big, limit);
  EXPECT_NE(big_out.find("Xid 13 (Graphics engine exception),"), std::string::npos) << big_out;
  EXPECT_NE(big_out.find("Xid 31"), std::string::npos) << big_out;
  EXPECT_NE(big_out.find("times"), std::string::npos) << big_out;
  EXPECT_GT(small_peak, 0);
  EXPECT_LT(big_peak - small_peak, 8 * 1024) << "KiB: " << small_peak << " for 100 KiB, " << big_peak << " for the big log";
  if (!kAsan) {
    EXPECT_LT(big_peak, 32 * 1024) << "KiB";
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpureap::test
