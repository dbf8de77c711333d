// Reading Xid events from saved kernel logs of every format, from pipes, and from /dev/kmsg.
#include "doctor/kernel_log.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace gpureap {
namespace {

std::string fixture(const std::string& name) {
  return std::string(GPUREAP_FIXTURE_DIR) + "/kernel-log/" + name;
}

// The directories temp_dir made, removed with what they hold when the test program ends.
struct MadeDirs {
  std::vector<std::string> paths;
  ~MadeDirs() {
    for (const std::string& path : paths) {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  }
};

// A fresh directory per test, so tests can run in parallel.
std::string temp_dir() {
  static MadeDirs made;
  std::string pattern = ::testing::TempDir() + "gpureap-kernel-log-XXXXXX";
  EXPECT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
  made.paths.push_back(pattern);
  return pattern;
}

// ---- the fixtures: every Xid variant among other kernel lines, in each format

struct Expected {
  const char* pci;
  std::optional<unsigned> gi, ci;
  unsigned xid;
  std::optional<int> pid;
  std::optional<std::string> name;
  const char* message;
  double seconds;
  const char* clock;  // wall-clock time of the line in the dmesg -T and journal fixtures
};

const std::array<Expected, 7> kEvents = {{
    {"0000:05:00", {}, {}, 79, 1173, {}, "GPU has fallen off the bus.", 5678.901234, "18:28:39"},
    {"0000:05:00", {}, {}, 79, {}, {}, "GPU has fallen off the bus.", 5679.000100, "18:28:40"},
    {"0000:2b:00", {}, {}, 79, {}, {}, "GPU has fallen off the bus.", 5680.5, "18:28:41"},
    {"0000:01:00",
     {},
     {},
     154,
     {},
     {},
     "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
     6001.000007,
     "18:34:02"},
    {"0000:3b:00", 2, 1, 31, 4242, "python3",
     "Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
     "0x7f12_34560000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
     7200.123456, "18:54:01"},
    {"0000:03:00", {}, {}, 14, {}, {}, "Channel 00000001", 7300.000001, "18:55:41"},
    {"0000:3b:00",
     {},
     {},
     13,
     5150,
     "my trainer",
     "Graphics Exception: ESR 0x405840=0x4",
     7400.25,
     "18:57:21"},
}};

struct Format {
  const char* file;
  std::size_t lines;                     // lines in the file, Xid or not
  std::array<std::size_t, 7> line_of;    // where each of kEvents sits
  bool has_uptime;                       // the format carries seconds since boot
  std::string time_prefix, time_suffix;  // around the clock in time_text
};

void PrintTo(const Format& format, std::ostream* out) { *out << format.file; }

class KernelLogFixture : public ::testing::TestWithParam<Format> {};

TEST_P(KernelLogFixture, FindsEveryXidWithItsFields) {
  const Format& format = GetParam();
  const KernelLogRead read = read_kernel_log_file(fixture(format.file));
  ASSERT_FALSE(read.error) << *read.error;
  EXPECT_EQ(read.source, fixture(format.file));
  EXPECT_EQ(read.lines_read, format.lines);
  EXPECT_FALSE(read.truncated);
  ASSERT_EQ(read.events.size(), kEvents.size()) << "the line with a bad PCI id is not an event";
  for (std::size_t i = 0; i < kEvents.size(); ++i) {
    const Expected& want = kEvents[i];
    const XidEvent& got = read.events[i];
    SCOPED_TRACE(testing::Message() << format.file << " event " << i << ": " << got.line);
    EXPECT_EQ(pci_text(got.pci), want.pci);
    EXPECT_EQ(got.gpu_instance, want.gi);
    EXPECT_EQ(got.compute_instance, want.ci);
    EXPECT_EQ(got.xid, want.xid);
    EXPECT_EQ(got.pid, want.pid);
    EXPECT_EQ(got.process_name, want.name);
    EXPECT_EQ(got.message, want.message);
    EXPECT_EQ(got.line_number, format.line_of[i]);
    EXPECT_NE(got.line.find("NVRM: Xid"), std::string::npos);
    if (format.has_uptime) {
      ASSERT_TRUE(got.seconds_since_boot);
      EXPECT_NEAR(*got.seconds_since_boot, want.seconds, 1e-6);
      char text[32];
      std::snprintf(text, sizeof text, "[%12.6f]", want.seconds);
      EXPECT_EQ(got.time_text, text);
    } else {
      EXPECT_FALSE(got.seconds_since_boot);
      EXPECT_EQ(got.time_text, format.time_prefix + want.clock + format.time_suffix);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    KernelLogFormats, KernelLogFixture,
    ::testing::Values(
        Format{"kmsg.txt", 18, {6, 10, 11, 13, 14, 15, 17}, true, "", ""},
        Format{"dmesg.txt", 16, {6, 8, 9, 11, 12, 13, 15}, true, "", ""},
        Format{"dmesg-T.txt", 16, {6, 8, 9, 11, 12, 13, 15}, false, "[Sun Nov 29 ", " 2026]"},
        Format{"journalctl-k.txt", 17, {7, 9, 10, 12, 13, 14, 16}, false, "Nov 29 ", ""},
        Format{"journalctl-short-iso.txt",
               17,
               {7, 9, 10, 12, 13, 14, 16},
               false,
               "2026-11-29T",
               "+0000"}),
    [](const testing::TestParamInfo<Format>& param) {
      std::string name = param.param.file;
      for (char& c : name) {
        if (c == '-' || c == '.') c = '_';
      }
      return name;
    });

// ---- files: errors, pipes, odd text

TEST(KernelLogFile, MissingFileIsAnErrorNamingThePath) {
  const std::string path = temp_dir() + "/no-such.log";
  const KernelLogRead read = read_kernel_log_file(path);
  ASSERT_TRUE(read.error);
  EXPECT_NE(read.error->find(path), std::string::npos) << *read.error;
  EXPECT_NE(read.error->find("No such file"), std::string::npos) << *read.error;
  EXPECT_EQ(read.lines_read, 0u);
  EXPECT_TRUE(read.events.empty());
}

TEST(KernelLogFile, DirectoryIsAnError) {
  const std::string path = temp_dir();
  const KernelLogRead read = read_kernel_log_file(path);
  ASSERT_TRUE(read.error);
  EXPECT_NE(read.error->find(path), std::string::npos) << *read.error;
}

TEST(KernelLogFile, UnreadableFileIsAnError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  const std::string path = temp_dir() + "/secret.log";
  std::ofstream(path) << "NVRM: Xid (PCI:0000:05:00): 79, x\n";
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  const KernelLogRead read = read_kernel_log_file(path);
  ASSERT_TRUE(read.error);
  EXPECT_NE(read.error->find("Permission denied"), std::string::npos) << *read.error;
}

// A FIFO may never end (and opening one waits for a writer); /dev/zero never ends: a saved log
// is a regular file, and anything else is refused at once, naming the path.
TEST(KernelLogFile, PipeFifoAndDevZeroAreRefusedWithoutWaiting) {
  const std::string fifo = temp_dir() + "/kernel.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);  // a writer that never writes nor closes
  const std::string pipe = "/proc/self/fd/" + std::to_string(fds[0]);
  for (const std::string& path : {fifo, pipe, std::string("/dev/zero")}) {
    const auto start = std::chrono::steady_clock::now();
    const KernelLogRead read = read_kernel_log_file(path);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << path;
    ASSERT_TRUE(read.error) << path;
    EXPECT_NE(read.error->find(path), std::string::npos) << *read.error;
    EXPECT_NE(kernel_log_file_problem(path), "") << path;
  }
  ::close(fds[0]);
  ::close(fds[1]);
}

// A log of any size is read whole, in constant memory, with the file's own line numbers.
TEST(KernelLogFile, HugeFileIsReadWholeWithTrueLineNumbers) {
  const std::string path = temp_dir() + "/huge.log";
  std::ofstream(path) << "[ 1.000000] NVRM: Xid (PCI:0000:05:00): 13, pid=1, the first line.\n";
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(65u << 20)), 0);  // sparse: one long line of NULs
  std::ofstream(path, std::ios::app) << "\n[ 2.500000] NVRM: Xid (PCI:0000:05:00): 79, pid=1173, GPU has fallen off the bus.\n";
  std::vector<std::pair<unsigned, std::size_t>> seen;
  const XidSink sink = [&](XidEvent&& e) { seen.emplace_back(e.xid, e.line_number); };
  const KernelLogRead read = read_kernel_log_file(path, sink);
  ASSERT_FALSE(read.error) << *read.error;
  EXPECT_TRUE(read.events.empty()) << "the sink took them";
  EXPECT_EQ(seen, (std::vector<std::pair<unsigned, std::size_t>>{{13, 1}, {79, 3}}));
  EXPECT_EQ(read.lines_read, 3u);
  EXPECT_EQ(read.bytes_unread, 0u);
  EXPECT_EQ(unread_part_text(read), "");
}

// After its first read, a follower (watch's looks, export's scrapes) reads at most
// kMaxKernelLogGrowthBytes a call: a log written faster than that (a flood, a line that never
// ends) costs each look a bounded read, and what is left is read by the next calls, so that
// every event is counted once and line numbers stay the file's.
TEST(KernelLogFollower, AFloodIsReadOverSeveralCallsAndNothingIsSkipped) {
  const std::string path = temp_dir() + "/growing.log";
  std::ofstream(path) << "[ 1.000000] NVRM: Xid (PCI:0000:05:00): 13, pid=1, at the start.\n";
  KernelLogFollower follower(KernelLogFollower::Kind::SavedFile, path);
  ASSERT_EQ(follower.read_new().events.size(), 1u);
  const std::string junk(99, 'j');
  const std::size_t flood_lines = 3 * kMaxKernelLogGrowthBytes / (junk.size() + 1);
  {
    std::ofstream out(path, std::ios::app);
    out << "[ 2.000000] NVRM: Xid (PCI:0000:05:00): 31, pid=1, before the flood.\n";
    for (std::size_t i = 0; i < flood_lines; ++i) out << junk << '\n';
    out << "[ 3.000000] NVRM: Xid (PCI:0000:05:00): 79, pid=1, the newest.\n";
  }
  std::vector<std::pair<unsigned, std::size_t>> seen;
  const XidSink sink = [&](XidEvent&& e) { seen.emplace_back(e.xid, e.line_number); };
  const KernelLogRead first = follower.read_new(sink);
  ASSERT_FALSE(first.error) << *first.error;
  EXPECT_LE(first.bytes_read, 100 + kMaxKernelLogGrowthBytes) << "the first line and one growth's worth";
  EXPECT_GT(first.bytes_unread, 0u);
  EXPECT_NE(unread_part_text(first).find(path + ": read lines 1 to "), std::string::npos) << unread_part_text(first);
  int calls = 1;
  for (KernelLogRead more = first; more.bytes_unread > 0 && calls < 10; ++calls) more = follower.read_new(sink);
  EXPECT_EQ(calls, 4) << "3 growths' worth and a little more";
  EXPECT_EQ(seen, (std::vector<std::pair<unsigned, std::size_t>>{{31, 2}, {79, flood_lines + 3}}));
  // A line that never ends is read on, a bounded part a call, and counted once it ends.
  std::ofstream(path, std::ios::app) << std::string(2 * kMaxKernelLogGrowthBytes, 'x');
  seen.clear();
  EXPECT_GT(follower.read_new(sink).bytes_unread, 0u);
  EXPECT_EQ(follower.read_new(sink).bytes_unread, 0u);
  std::ofstream(path, std::ios::app) << "\n[ 4.000000] NVRM: Xid (PCI:0000:05:00): 43, pid=1, after it.\n";
  const KernelLogRead after = follower.read_new(sink);
  EXPECT_EQ(after.bytes_unread, 0u);
  EXPECT_EQ(seen, (std::vector<std::pair<unsigned, std::size_t>>{{43, flood_lines + 5}}));
}

// A history longer than a follower reads a call (watch's first looks) is read over the next
// calls, whole: the events at its start and at its end, each once, with their line numbers.
TEST(KernelLogFollower, ALongHistoryIsReadOverSeveralCallsWhole) {
  const std::string path = temp_dir() + "/history.log";
  const std::string junk(99, 'h');
  const std::size_t junk_lines = 30000;  // about 3 MB
  {
    std::ofstream out(path);
    out << "[ 1.000000] NVRM: Xid (PCI:0000:05:00): 13, pid=1, the oldest.\n";
    for (std::size_t i = 0; i < junk_lines; ++i) out << junk << '\n';
    out << "[ 2.000000] NVRM: Xid (PCI:0000:05:00): 79, pid=1, the newest.\n";
  }
  KernelLogFollower follower(KernelLogFollower::Kind::SavedFile, path, 1u << 20);
  std::vector<std::pair<unsigned, std::size_t>> seen;
  const XidSink sink = [&](XidEvent&& e) { seen.emplace_back(e.xid, e.line_number); };
  KernelLogRead read = follower.read_new(sink);
  EXPECT_EQ(read.bytes_read, 1u << 20);
  int calls = 1;
  for (; read.bytes_unread > 0 && calls < 10; ++calls) read = follower.read_new(sink);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(read.lines_read, junk_lines + 2);
  EXPECT_EQ(seen, (std::vector<std::pair<unsigned, std::size_t>>{{13, 1}, {79, junk_lines + 2}}));
}

TEST(KernelLogFile, CrlfContinuationLinesAndNoFinalNewline) {
  const KernelLogRead read = scan_kernel_log_text(
      "3,1,100,-;NVRM: Xid (PCI:0000:05:00): 79, pid=1, a.\r\n"
      " SUBSYSTEM=pci\r\n"
      " DEVICE=+pci:0000:05:00.0\r\n"
      "\r\n"
      "3,2,200,-;NVRM: Xid (PCI:0000:05:00): 43, pid=1, b.",
      "memory");
  EXPECT_EQ(read.source, "memory");
  EXPECT_EQ(read.lines_read, 5u);
  ASSERT_EQ(read.events.size(), 2u);
  EXPECT_EQ(read.events[0].message, "a.");
  EXPECT_EQ(read.events[0].line, "3,1,100,-;NVRM: Xid (PCI:0000:05:00): 79, pid=1, a.");
  EXPECT_EQ(read.events[1].xid, 43u);
  EXPECT_EQ(read.events[1].line_number, 5u);
}

TEST(KernelLogFile, OverlongLineIsCutWithoutLosingTheNextLines) {
  std::string text(3u << 20, 'x');  // a binary blob with no newline for 3 MiB
  text += "\nNVRM: Xid (PCI:0000:05:00): 79, after the blob.\n";
  const KernelLogRead read = scan_kernel_log_text(text, "blob");
  EXPECT_EQ(read.lines_read, 2u);
  ASSERT_EQ(read.events.size(), 1u);
  EXPECT_EQ(read.events[0].line_number, 2u);
}

// ---- /dev/kmsg

TEST(KernelLogKmsg, RegularFileIsReadOneRecordPerLine) {
  const KernelLogRead read = read_kmsg(fixture("kmsg.txt"));
  ASSERT_FALSE(read.error) << *read.error;
  EXPECT_EQ(read.source, fixture("kmsg.txt"));
  EXPECT_EQ(read.lines_read, 18u);
  ASSERT_EQ(read.events.size(), kEvents.size());
  EXPECT_EQ(read.events[4].gpu_instance, 2u);
  EXPECT_NEAR(*read.events[4].seconds_since_boot, 7200.123456, 1e-6);
}

TEST(KernelLogKmsg, MissingDeviceSuggestsAKernelLogFile) {
  const std::string path = temp_dir() + "/kmsg";
  const KernelLogRead read = read_kmsg(path);
  ASSERT_TRUE(read.error);
  EXPECT_NE(read.error->find(path), std::string::npos) << *read.error;
  EXPECT_NE(read.error->find("--kernel-log"), std::string::npos) << *read.error;
}

TEST(KernelLogKmsg, PermissionDeniedSaysWhatToDo) {
  if (::geteuid() == 0) GTEST_SKIP() << "root opens files whatever their mode";
  const std::string path = temp_dir() + "/kmsg";
  std::ofstream(path) << "6,1,1,-;hello\n";
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  const KernelLogRead read = read_kmsg(path);
  ASSERT_TRUE(read.error);
  EXPECT_NE(read.error->find("dmesg_restrict"), std::string::npos) << *read.error;
  EXPECT_NE(read.error->find("root"), std::string::npos) << *read.error;
  EXPECT_NE(read.error->find("journalctl -k"), std::string::npos) << *read.error;
}

TEST(KernelLogKmsg, ReadsTheRealDevice) {
  struct stat st {};
  if (::stat("/dev/kmsg", &st) != 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 1 ||
      minor(st.st_rdev) != 11)
    GTEST_SKIP() << "/dev/kmsg is missing or is not the kernel log device here (a container?)";
  const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    // Not root under dmesg_restrict: the error value must say so and what to do instead.
    const KernelLogRead denied = read_kmsg();
    ASSERT_TRUE(denied.error);
    EXPECT_NE(denied.error->find("--kernel-log"), std::string::npos) << *denied.error;
    if (err == EPERM || err == EACCES) {
      EXPECT_NE(denied.error->find("dmesg_restrict"), std::string::npos) << *denied.error;
    }
    GTEST_SKIP() << "cannot open /dev/kmsg: " << std::strerror(err) << "; " << *denied.error;
  }
  ::close(fd);
  const KernelLogRead read = read_kmsg();
  ASSERT_FALSE(read.error) << *read.error;
  EXPECT_EQ(read.source, "/dev/kmsg");
  EXPECT_GT(read.lines_read, 0u);
}

}  // namespace
}  // namespace gpureap
