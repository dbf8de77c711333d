// Parsers for /proc/<pid>/{stat,status,cmdline} and fd link targets, on fixture text.
#include "proc/proc_parse.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace gpureap {
namespace {

std::string fixture(const std::string& relative) {
  std::ifstream in(std::string(GPUREAP_FIXTURE_DIR) + "/proc/" + relative, std::ios::binary);
  EXPECT_TRUE(in.good()) << relative;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---- stat

TEST(ProcParseStat, ReadsEveryKeptField) {
  const auto stat = parse_stat(fixture("stat/python.stat"));
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->pid, 4242);
  EXPECT_EQ(stat->comm, "python3");
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->ppid, 4200);
  EXPECT_EQ(stat->pgid, 4242);
  EXPECT_EQ(stat->session, 4100);
  EXPECT_EQ(stat->flags, 4194560u);
  EXPECT_EQ(stat->utime_ticks, 1500u);
  EXPECT_EQ(stat->stime_ticks, 300u);
  EXPECT_EQ(stat->start_time_ticks, 5000u);
  EXPECT_EQ(stat->rss_pages, 2560u);
}

TEST(ProcParseStat, NameWithSpacesAndParenthesesIsCutAtTheLastParenthesis) {
  const auto stat = parse_stat(fixture("stat/hostile_name.stat"));
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->pid, 777);
  EXPECT_EQ(stat->comm, "(my) (proc) name)");
  EXPECT_EQ(stat->state, 'R');
  EXPECT_EQ(stat->ppid, 1);
  EXPECT_EQ(stat->start_time_ticks, 123456u);
}

TEST(ProcParseStat, NameMayHoldNewlinesAndBeEmpty) {
  auto stat = parse_stat("5 (a\nb) S 1 5 5 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 7 0\n");
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->comm, "a\nb");
  EXPECT_EQ(stat->rss_pages, 7u);
  stat = parse_stat("5 () S 1 5 5 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 7\n");
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->comm, "");
}

TEST(ProcParseStat, Zombie) {
  const auto stat = parse_stat(fixture("stat/zombie.stat"));
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->state, 'Z');
  EXPECT_EQ(stat->ppid, 4242);
  EXPECT_EQ(stat->rss_pages, 0u);
}

TEST(ProcParseStat, KernelThreadsCarryPfKthread) {
  for (const char* name : {"stat/kthreadd.stat", "stat/kworker.stat"}) {
    const auto stat = parse_stat(fixture(name));
    ASSERT_TRUE(stat) << name;
    EXPECT_NE(stat->flags & 0x00200000u, 0u) << name;
  }
  const auto kworker = parse_stat(fixture("stat/kworker.stat"));
  EXPECT_EQ(kworker->comm, "kworker/u8:3-events_unbound");
  EXPECT_EQ(kworker->state, 'I');
  EXPECT_EQ(kworker->ppid, 2);
  const auto kthreadd = parse_stat(fixture("stat/kthreadd.stat"));
  EXPECT_EQ(kthreadd->ppid, 0);
  EXPECT_EQ(kthreadd->pgid, 0);
  EXPECT_EQ(parse_stat(fixture("stat/python.stat"))->flags & 0x00200000u, 0u);
}

TEST(ProcParseStat, UninterruptibleSleep) {
  const auto stat = parse_stat(fixture("stat/dstate.stat"));
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->state, 'D');
  EXPECT_EQ(stat->comm, "nvidia-smi");
}

TEST(ProcParseStat, NegativeRssCountsAsZero) {
  const auto stat = parse_stat("5 (x) S 1 5 5 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 -3\n");
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->rss_pages, 0u);
}

TEST(ProcParseStat, RejectsTruncatedAndMalformedText) {
  const std::string good = fixture("stat/python.stat");
  // Cut anywhere up to the end of the rss field (even mid-number): no answer rather than
  // a half-filled or wrong one.
  const std::size_t rss_end = good.find(" 2560 ") + 5;
  for (std::size_t cut = 0; cut <= rss_end; ++cut) {
    EXPECT_FALSE(parse_stat(std::string_view(good).substr(0, cut))) << "cut at " << cut;
  }
  EXPECT_TRUE(parse_stat(std::string_view(good).substr(0, rss_end + 1)));
  for (const char* bad : {
           "", "(", ")", ")(", "1 (x", "x (y) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
           "0 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
           "-1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
           "99999999999 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
           "1 (x) SS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
           "1 (x)S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
           "1 (x) S -1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
           "1 (x) S 1 1 1 0 -1 0 0 0 0 0 99999999999999999999999 0 0 0 0 0 0 0 0 0 0 0",
           "1(x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
       }) {
    EXPECT_FALSE(parse_stat(bad)) << bad;
  }
}

// ---- fdinfo

TEST(ProcParseFdinfo, FlagsAreTheOctalOfTheirOwnLine) {
  // An O_PATH descriptor (O_PATH | O_CLOEXEC | O_LARGEFILE), then a read-write one, as 6.x prints them.
  EXPECT_EQ(parse_fdinfo_flags("pos:\t0\nflags:\t012100000\nmnt_id:\t25\nino:\t5\n"), 012100000ul);
  EXPECT_EQ(parse_fdinfo_flags("pos:\t0\nflags:\t02100002\nmnt_id:\t25\n"), 02100002ul);
  // Another key ending in "flags:" (a driver's own line) is not it.
  EXPECT_EQ(parse_fdinfo_flags("pos:\t0\ndrm-flags:\t010000000\nflags:\t02\n"), 02ul);
}

TEST(ProcParseFdinfo, NoFlagsLineOrOneThatIsNotWholeOctalIsNothing) {
  EXPECT_EQ(parse_fdinfo_flags(""), std::nullopt);
  EXPECT_EQ(parse_fdinfo_flags("pos:\t0\nmnt_id:\t25\n"), std::nullopt);
  EXPECT_EQ(parse_fdinfo_flags("flags:\t\n"), std::nullopt);
  EXPECT_EQ(parse_fdinfo_flags("flags:\t019\n"), std::nullopt);
  EXPECT_EQ(parse_fdinfo_flags("flags:\t0x12\n"), std::nullopt);
  EXPECT_EQ(parse_fdinfo_flags("flags:\t-1\n"), std::nullopt);
  EXPECT_EQ(parse_fdinfo_flags("flags:\t7777777777777777777777777\n"), std::nullopt) << "past unsigned long";
}

// ---- status

TEST(ProcParseStatus, HostProcessHasOneNamespaceLevel) {
  const auto status = parse_status(fixture("status/nspid1.status"));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->name, "python3");
  EXPECT_EQ(status->real_uid, 1000u);
  EXPECT_EQ(status->effective_uid, 1000u);
  EXPECT_EQ(status->ns_pids, (std::vector<pid_t>{4242}));
}

TEST(ProcParseStatus, ContainerProcessListsHostPidFirst) {
  const auto status = parse_status(fixture("status/nspid2.status"));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->ns_pids, (std::vector<pid_t>{31337, 1}));
  EXPECT_EQ(status->real_uid, 0u);
}

TEST(ProcParseStatus, NestedNamespacesThreeLevels) {
  const auto status = parse_status(fixture("status/nspid3.status"));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->ns_pids, (std::vector<pid_t>{40000, 57, 3}));
  EXPECT_EQ(status->effective_uid, 100000u);
}

TEST(ProcParseStatus, RealAndEffectiveUidDiffer) {
  const auto status = parse_status(fixture("status/setuid.status"));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->real_uid, 1000u);
  EXPECT_EQ(status->effective_uid, 0u);
}

TEST(ProcParseStatus, KernelsWithoutNSpidGiveAnEmptyChain) {
  const auto status = parse_status(fixture("status/old_kernel.status"));
  ASSERT_TRUE(status);
  EXPECT_TRUE(status->ns_pids.empty());
  EXPECT_EQ(status->name, "bash");
}

TEST(ProcParseStatus, UnescapesName) {
  const auto status = parse_status(fixture("status/escaped_name.status"));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->name, "a\\b\nc");
}

// Found by fuzz/proc_status_fuzz: a name's own leading tabs and spaces were dropped, so
// a process called "\t Xorg" was reported as "Xorg".
TEST(ProcParseStatus, NameKeepsItsOwnLeadingBlanks) {
  const auto status = parse_status("Name:\t\t Xorg\nUid:\t1000\t1000\t1000\t1000\n");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->name, "\t Xorg");
}

TEST(ProcParseStatus, RejectsGarbage) {
  for (const char* bad : {"", "garbage", "Uid:\n", "Uid:\t1000\n", "Uid:\tx\ty\n",
                          "Uid:\t1\t2\t3\t4\nNSpid:\t\n", "Uid:\t1\t2\t3\t4\nNSpid:\t0\n",
                          "Uid:\t1\t2\nNSpid:\t5\t-1\n", "Uid:\t99999999999\t1\n", "Name:\tx\n"}) {
    EXPECT_FALSE(parse_status(bad)) << bad;
  }
}

// ---- cmdline

TEST(ProcParseCmdline, SplitsOnNulAndIgnoresTheTrailingOne) {
  using V = std::vector<std::string>;
  using namespace std::string_literals;
  EXPECT_EQ(parse_cmdline("python3\0train.py\0--lr\0" "0.1\0"s),
            (V{"python3", "train.py", "--lr", "0.1"}));
  EXPECT_EQ(parse_cmdline(""), V{});
  EXPECT_EQ(parse_cmdline("rewritten title: with spaces"), V{"rewritten title: with spaces"});
  EXPECT_EQ(parse_cmdline("a\0\0b\0"s), (V{"a", "", "b"}));
  EXPECT_EQ(parse_cmdline("\0"s), V{""});
}

// ---- classify_device_path

TEST(ProcClassifyDevicePath, RecognisesEveryNvidiaNode) {
  struct Case {
    const char* path;
    DeviceFileKind kind;
    int minor;
  };
  for (const Case& c : {Case{"/dev/nvidiactl", DeviceFileKind::Control, -1},
                        Case{"/dev/nvidia0", DeviceFileKind::Gpu, 0},
                        Case{"/dev/nvidia12", DeviceFileKind::Gpu, 12},
                        Case{"/dev/nvidia-uvm", DeviceFileKind::Uvm, -1},
                        Case{"/dev/nvidia-uvm-tools", DeviceFileKind::UvmTools, -1},
                        Case{"/dev/nvidia-modeset", DeviceFileKind::Modeset, -1},
                        Case{"/dev/nvidia-caps/nvidia-cap21", DeviceFileKind::Caps, 21}}) {
    const auto handle = classify_device_path(c.path, "/dev");
    ASSERT_TRUE(handle) << c.path;
    EXPECT_EQ(handle->kind, c.kind) << c.path;
    EXPECT_EQ(handle->minor, c.minor) << c.path;
    EXPECT_EQ(handle->path, c.path);
  }
}

TEST(ProcClassifyDevicePath, RejectsLookalikesAndNonFiles) {
  for (const char* path :
       {"/dev/nvidia0x", "/dev/nvidia", "/dev/null", "/dev/nvidia-", "/dev/nvidia-uvmx",
        "/dev/nvidia-caps", "/dev/nvidia-caps/nvidia-cap", "/dev/nvidia-caps/nvidia-capx",
        "/dev/nvidia-caps/other1", "/dev/nvidia99999", "/dev/nvidia-1", "/dev/nvidia 0",
        "/dev/dri/card0", "/dev/nvidiactl2", "/devx/nvidia0", "/dev", "/dev/", "nvidia0",
        "socket:[123]", "anon_inode:[eventfd]", "pipe:[42]", "/tmp/sim/dev/nvidia1",
        "/dev/nvidia0 (deleted) (deleted)", "", "/dev/sub/nvidia0"}) {
    EXPECT_FALSE(classify_device_path(path, "/dev")) << path;
  }
}

// A descriptor on an unlinked node still pins the driver's file (and its memory), so it
// counts; the path keeps the suffix to show the node is gone.
TEST(ProcClassifyDevicePath, DeletedNodeStillCounts) {
  const auto handle = classify_device_path("/dev/nvidia0 (deleted)", "/dev");
  ASSERT_TRUE(handle);
  EXPECT_EQ(handle->kind, DeviceFileKind::Gpu);
  EXPECT_EQ(handle->minor, 0);
  EXPECT_EQ(handle->path, "/dev/nvidia0 (deleted)");
}

TEST(ProcClassifyDevicePath, OtherDevDirWithOrWithoutTrailingSlash) {
  for (const char* dev_dir : {"/tmp/sim/dev", "/tmp/sim/dev/", "/tmp/sim/dev//"}) {
    const auto handle = classify_device_path("/tmp/sim/dev/nvidia1", dev_dir);
    ASSERT_TRUE(handle) << dev_dir;
    EXPECT_EQ(handle->kind, DeviceFileKind::Gpu);
    EXPECT_EQ(handle->minor, 1);
    EXPECT_TRUE(classify_device_path("/tmp/sim/dev/nvidiactl", dev_dir)) << dev_dir;
    EXPECT_FALSE(classify_device_path("/dev/nvidia1", dev_dir)) << dev_dir;
    EXPECT_FALSE(classify_device_path("/tmp/sim/devx/nvidia1", dev_dir)) << dev_dir;
  }
  EXPECT_TRUE(classify_device_path("/nvidia3", "/"));
}

// ---- robustness: every parser on every prefix and on byte-flipped copies of every fixture.
// A prefix is a read cut short: it parses to nothing or to what the whole file says, never to
// other numbers. Whatever parses keeps the properties the callers rely on.

void expect_parsed_well(std::string_view text) {
  if (const auto stat = parse_stat(text)) {
    const auto open = text.find('('), close = text.rfind(')');
    EXPECT_GT(stat->pid, 0);
    EXPECT_EQ(stat->comm, text.substr(open + 1, close - open - 1)) << "the name runs to the last ')'";
  }
  if (parse_status(text)) {
    EXPECT_NE(text.find("Uid:"), std::string_view::npos) << "no Uid: line, no status";
  }
  std::string joined;
  for (const auto& arg : parse_cmdline(text)) joined += arg + '\0';
  if (!text.empty() && text.back() != '\0') joined.pop_back();
  EXPECT_EQ(joined, text) << "the arguments are the NUL-separated pieces";
  if (const auto container = parse_cgroup(text)) {
    EXPECT_NE(text.find(container->cgroup_path), std::string_view::npos) << "a cgroup path the file does not hold";
    EXPECT_NE(container->cgroup_path.find(container->id), std::string::npos) << "an id its cgroup path does not hold";
  }
  if (const auto handle = classify_device_path(text, "/dev")) {
    EXPECT_TRUE(text.starts_with("/dev/")) << "a device file outside /dev";
  }
}

TEST(ProcParseRobustness, ACutStatParsesToNothingOrToTheWholeFile) {
  for (const char* name : {"stat/python.stat", "stat/hostile_name.stat", "stat/zombie.stat", "stat/kworker.stat"}) {
    const std::string whole = fixture(name);
    const auto full = parse_stat(whole);
    ASSERT_TRUE(full) << name;
    std::size_t parsed = 0;
    for (std::size_t cut = 0; cut < whole.size(); ++cut) {
      const auto stat = parse_stat(std::string_view(whole).substr(0, cut));
      if (!stat) continue;
      ++parsed;
      EXPECT_EQ(stat->pid, full->pid) << name << " cut at " << cut;
      EXPECT_EQ(stat->comm, full->comm) << name << " cut at " << cut;
      EXPECT_EQ(stat->ppid, full->ppid) << name << " cut at " << cut;
      EXPECT_EQ(stat->start_time_ticks, full->start_time_ticks) << name << " cut at " << cut;
      EXPECT_EQ(stat->rss_pages, full->rss_pages) << name << " cut at " << cut;
    }
    // The fields after rss are not read: a cut among them still parses.
    EXPECT_GT(parsed, 0u) << name;
  }
}

TEST(ProcParseRobustness, TruncatedAndMutatedInputParsesWellOrNotAtAll) {
  std::vector<std::string> inputs;
  for (const char* name :
       {"stat/python.stat", "stat/hostile_name.stat", "stat/zombie.stat", "stat/kworker.stat",
        "status/nspid1.status", "status/nspid3.status", "status/escaped_name.status",
        "cgroup/kind_systemd.cgroup", "cgroup/hybrid_docker_systemd.cgroup",
        "cgroup/kubepods_cgroupfs_v1.cgroup", "cgroup/podman_payload.cgroup"}) {
    inputs.push_back(fixture(name));
  }
  std::uint32_t seed = 12345;
  const auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  const char alphabet[] = {'\0', '\n', '\t', ' ', '(', ')', ':', '/', '-', '_', '0', '9', 'a', 'f', '.', '\xff'};
  for (const std::string& input : inputs) {
    for (std::size_t cut = 0; cut <= input.size(); ++cut) expect_parsed_well(std::string_view(input).substr(0, cut));
    for (int round = 0; round < 300; ++round) {
      std::string mutated = input;
      for (int flips = 1 + static_cast<int>(next() % 8); flips > 0; --flips) {
        mutated[next() % mutated.size()] = alphabet[next() % sizeof(alphabet)];
      }
      expect_parsed_well(mutated);
    }
  }
}

}  // namespace
}  // namespace gpureap
