// Xid lines as the driver prints them, behind every log prefix, and what each Xid calls for.
#include "doctor/xid_catalog.hpp"
#include "doctor/xid_event.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace gpureap {
namespace {

// ---- PCI locations

TEST(XidPci, ReadsNvmlAndXidForms) {
  const auto nvml = parse_pci_bus_id("00000000:3B:00.0");
  ASSERT_TRUE(nvml);
  EXPECT_EQ(nvml->domain, 0u);
  EXPECT_EQ(nvml->bus, 0x3bu);
  EXPECT_EQ(nvml->device, 0u);
  EXPECT_EQ(nvml->function, 0u);

  const auto legacy = parse_pci_bus_id("0001:05:1f.7");
  ASSERT_TRUE(legacy);
  EXPECT_EQ(legacy->domain, 1u);
  EXPECT_EQ(legacy->device, 0x1fu);
  EXPECT_EQ(legacy->function, 7u);

  const auto xid = parse_pci_bus_id("0000:05:00");
  ASSERT_TRUE(xid);
  EXPECT_FALSE(xid->function);
  EXPECT_TRUE(same_pci_device(*nvml, *parse_pci_bus_id("0000:3b:00")));
  EXPECT_FALSE(same_pci_device(*nvml, *xid));
  EXPECT_EQ(pci_text(*nvml), "0000:3b:00");
  EXPECT_EQ(pci_text(*parse_pci_bus_id("00010000:c1:02.0")), "10000:c1:02");
}

TEST(XidPci, RejectsMalformedIds) {
  for (const char* bad : {"", "0000", "0000:05", "0000:05:0", "0000:5:00", "0000:05:00.",
                          "0000:05:00.8", "0000:05:20", "000:05:00", "000000000:05:00",
                          "0000:05:00.0x", "0000:g5:00", "0000-05-00", "PCI:0000:05:00"}) {
    EXPECT_FALSE(parse_pci_bus_id(bad)) << bad;
  }
}

// ---- the Xid part

TEST(XidParse, PidWithoutName) {
  const auto e =
      parse_xid_line("NVRM: Xid (PCI:0000:05:00): 79, pid=1173, GPU has fallen off the bus.");
  ASSERT_TRUE(e);
  EXPECT_EQ(pci_text(e->pci), "0000:05:00");
  EXPECT_EQ(e->xid, 79u);
  EXPECT_EQ(e->pid, 1173);
  EXPECT_FALSE(e->process_name);
  EXPECT_EQ(e->message, "GPU has fallen off the bus.");
  EXPECT_EQ(e->time_text, "");
  EXPECT_FALSE(e->seconds_since_boot);
  EXPECT_FALSE(e->gpu_instance);
}

TEST(XidParse, UnknownPidAndNameAreAbsent) {
  const auto e = parse_xid_line(
      "NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the "
      "bus.");
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->pid);
  EXPECT_FALSE(e->process_name);
  EXPECT_EQ(e->message, "GPU has fallen off the bus.");
}

TEST(XidParse, MigInstancesAndName) {
  const auto e = parse_xid_line(
      "NVRM: Xid (PCI:0000:3b:00 GPU-I:02 GPU-CI:01): 31, pid=4242, name=python3, Ch 00000010, "
      "...");
  ASSERT_TRUE(e);
  EXPECT_EQ(pci_text(e->pci), "0000:3b:00");
  EXPECT_EQ(e->gpu_instance, 2u);
  EXPECT_EQ(e->compute_instance, 1u);
  EXPECT_EQ(e->xid, 31u);
  EXPECT_EQ(e->pid, 4242);
  EXPECT_EQ(e->process_name, "python3");
  EXPECT_EQ(e->message, "Ch 00000010, ...");
}

TEST(XidParse, OldDriverWithoutPciPrefixOrPid) {
  const auto e = parse_xid_line("NVRM: Xid (0000:03:00): 14, Channel 00000001");
  ASSERT_TRUE(e);
  EXPECT_EQ(pci_text(e->pci), "0000:03:00");
  EXPECT_EQ(e->xid, 14u);
  EXPECT_FALSE(e->pid);
  EXPECT_EQ(e->message, "Channel 00000001");
}

TEST(XidParse, NameRunsToTheNextCommaSpace) {
  const auto e = parse_xid_line(
      "NVRM: Xid (PCI:0000:3b:00): 13, pid=5150, name=my trainer, Graphics Exception");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->process_name, "my trainer");
  EXPECT_EQ(e->message, "Graphics Exception");
}

TEST(XidParse, DriverLinesThatAreNotXidReports) {
  for (const char* line :
       {"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build",
        "NVRM: Persistence mode is deprecated and will be removed in a future release. Please "
        "use nvidia-persistenced instead.",
        "6,253,221054,-;NET: Registered PF_UNIX/PF_LOCAL protocol family",
        "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.", "NVRM: Xid", "NVRM: Xid (",
        "NVRM: Xid (PCI:0000:05:00)", "NVRM: Xid (PCI:0000:05:00): 79",
        "NVRM: Xid (PCI:0000:05:00): 0, zero", "NVRM: Xid (PCI:0000:05:00): 1000, too big",
        "NVRM: Xid (PCI:0000:05:00): 99999999999999999999999, huge",
        "NVRM: Xid (PCI:0000:05:00): -1, negative", "NVRM: Xid (PCI:zz:05): 79, bad pci",
        "NVRM: Xid (PCI:0000:3b:00 GPU-I:02 GPU-I:03): 31, twice",
        "nvrm: xid (PCI:0000:05:00): 79, x"}) {
    EXPECT_FALSE(parse_xid_line(line)) << line;
  }
}

TEST(XidParse, DoubtfulFieldsAreLeftEmpty) {
  // Cut inside the pid: the digits seen may be fewer than the driver printed.
  auto e = parse_xid_line("NVRM: Xid (PCI:0000:05:00): 79, pid=117");
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->pid);
  EXPECT_EQ(e->message, "");
  e = parse_xid_line("NVRM: Xid (PCI:0000:05:00): 79, pid=1173, name=pyth");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pid, 1173);
  EXPECT_FALSE(e->process_name);
  e = parse_xid_line("NVRM: Xid (PCI:0000:05:00): 79, pid=99999999999, x");
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->pid);
  EXPECT_EQ(e->message, "x");
}

// ---- prefixes: time_text and seconds_since_boot

TEST(XidPrefix, EveryLogFormat) {
  const std::string xid = "NVRM: Xid (PCI:0000:05:00): 79, pid=1173, GPU has fallen off the bus.";
  struct Case {
    std::string prefix, time_text;
    std::optional<double> seconds;
  };
  const std::vector<Case> cases = {
      {"6,1234,5678901,-;", "[    5.678901]", 5.678901},
      {"3,1205,5678901234,-,caller=T412;", "[ 5678.901234]", 5678.901234},
      {"[ 5678.901234] ", "[ 5678.901234]", 5678.901234},
      {"[Sun Nov 29 18:29:40 2026] ", "[Sun Nov 29 18:29:40 2026]", std::nullopt},
      {"Nov 29 18:29:40 host kernel: ", "Nov 29 18:29:40", std::nullopt},
      {"Nov  9 18:29:40.123456 host kernel: ", "Nov  9 18:29:40.123456", std::nullopt},
      {"Nov 29 18:29:40 host kernel: [ 12.5] ", "Nov 29 18:29:40", 12.5},
      {"2026-11-29T18:29:40+0000 host kernel: ", "2026-11-29T18:29:40+0000", std::nullopt},
      {"2026-11-29T18:29:40.123456+00:00 host kernel: ", "2026-11-29T18:29:40.123456+00:00",
       std::nullopt},
      {"kern  :err   : [ 7.25] ", "[ 7.25]", 7.25},
      {"", "", std::nullopt},
  };
  for (const auto& c : cases) {
    const auto e = parse_xid_line(c.prefix + xid + "\r\n");
    ASSERT_TRUE(e) << c.prefix;
    EXPECT_EQ(e->time_text, c.time_text) << c.prefix;
    ASSERT_EQ(e->seconds_since_boot.has_value(), c.seconds.has_value()) << c.prefix;
    if (c.seconds) {
      EXPECT_DOUBLE_EQ(*e->seconds_since_boot, *c.seconds) << c.prefix;
    }
    EXPECT_EQ(e->line, c.prefix + xid) << "the line is kept whole, without CR LF";
    EXPECT_EQ(e->xid, 79u);
    EXPECT_EQ(e->pid, 1173);
  }
}

// Only the driver writes "NVRM: Xid" where a kernel message starts; text a user controls that
// the kernel or a daemon echoes elsewhere in a line must not forge one (a critical Xid 79).
TEST(XidPrefix, TextInTheMiddleOfALineIsNoXid) {
  const std::string xid = "NVRM: Xid (PCI:0000:05:00): 79, pid=1173, GPU has fallen off the bus.";
  for (const std::string prefix : {
           "something else entirely ",
           "[ 5678.901234] python3[4242]: segfault in ",
           "6,1234,5678901,-;usb 1-1: new device ",
           "Nov 29 18:29:40 host myapp[77]: ",
           "Nov 29 18:29:40 host kernel: audit: comm=",
           "2026-11-29T18:29:40+0000 host sudo: ",
           "[Sun Nov 29 18:29:40 2026] x ",
           "user  :warn  : [ 7.25] ",
           " x",
       }) {
    EXPECT_FALSE(parse_xid_line(prefix + xid)) << prefix;
  }
}

// /dev/kmsg records carry their facility: userspace may write records there (LOG_USER and
// others), the kernel's are facility 0.
TEST(XidPrefix, KmsgRecordOfAnotherFacilityIsNoXid) {
  const std::string xid = "NVRM: Xid (PCI:0000:05:00): 79, pid=1173, GPU has fallen off the bus.";
  EXPECT_TRUE(parse_xid_line("3,1234,5678901,-;" + xid));   // kern.err
  EXPECT_TRUE(parse_xid_line("7,1234,5678901,-;" + xid));   // kern.debug
  EXPECT_FALSE(parse_xid_line("14,1234,5678901,-;" + xid));  // user.info
  EXPECT_FALSE(parse_xid_line("11,1234,5678901,-;" + xid));  // user.err
  EXPECT_FALSE(parse_xid_line("30,1234,5678901,-;" + xid));  // daemon.info
  EXPECT_FALSE(parse_xid_line("6,1234,5678901;" + xid)) << "a malformed header is not the kernel's";
}

// ---- robustness: no crash, no made-up fields

const std::vector<std::string>& sample_lines() {
  static const std::vector<std::string> lines = {
      "6,1234,5678901,-;NVRM: Xid (PCI:0000:05:00): 79, pid=1173, GPU has fallen off the bus.",
      "[ 5678.901234] NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has "
      "fallen off the bus.",
      "[Sun Nov 29 18:29:40 2026] NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
      "Nov 29 18:29:40 host kernel: NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action "
      "changed from 0x0 (None) to 0x1 (GPU Reset Required)",
      "2026-11-29T18:29:40+0000 host kernel: NVRM: Xid (PCI:0000:3b:00 GPU-I:02 GPU-CI:01): 31, "
      "pid=4242, name=python3, Ch 00000010, ...",
      "NVRM: Xid (0000:03:00): 14, Channel 00000001",
  };
  return lines;
}

void expect_sane(const XidEvent& e, const std::string& input) {
  EXPECT_GE(e.xid, 1u) << input;
  EXPECT_LE(e.xid, kMaxXid) << input;
  if (e.pid) {
    EXPECT_GT(*e.pid, 0) << input;
  }
  if (e.process_name) {
    EXPECT_EQ(e.process_name->find(", "), std::string::npos) << input;
  }
  EXPECT_LE(e.line.size(), input.size());
  describe_xid(e);  // must not crash on any message
}

TEST(XidRobustness, EveryTruncationGivesNothingOrTheTruth) {
  for (const std::string& full : sample_lines()) {
    const auto truth = parse_xid_line(full);
    ASSERT_TRUE(truth) << full;
    const XidAction true_action = describe_xid(*truth).action;
    for (std::size_t n = 0; n <= full.size(); ++n) {
      const std::string cut = full.substr(0, n);
      const auto e = parse_xid_line(cut);
      if (!e) continue;
      expect_sane(*e, cut);
      EXPECT_EQ(e->xid, truth->xid) << cut;
      EXPECT_TRUE(same_pci_device(e->pci, truth->pci)) << cut;
      EXPECT_EQ(e->gpu_instance, truth->gpu_instance) << cut;
      EXPECT_EQ(e->compute_instance, truth->compute_instance) << cut;
      if (e->pid) {
        EXPECT_EQ(e->pid, truth->pid) << cut;
      }
      if (e->process_name) {
        EXPECT_EQ(e->process_name, truth->process_name) << cut;
      }
      EXPECT_EQ(truth->message.rfind(e->message, 0), 0u) << cut;
      const XidAction action = describe_xid(*e).action;
      EXPECT_TRUE(action == true_action || action == XidAction::Unknown) << cut;
    }
  }
}

TEST(XidRobustness, RandomByteFlipsNeverCrashOrLeaveRange) {
  std::mt19937 random(20261129);  // fixed seed: a failure reproduces
  for (const std::string& full : sample_lines()) {
    for (int round = 0; round < 3000; ++round) {
      std::string line = full;
      const unsigned flips = 1 + random() % 4;
      for (unsigned i = 0; i < flips; ++i) {
        const std::size_t at = random() % line.size();
        line[at] = static_cast<char>(random() % 256);  // any byte: NUL, CR, LF, non-UTF-8
      }
      if (random() % 4 == 0) line.resize(random() % (line.size() + 1));
      if (const auto e = parse_xid_line(line)) expect_sane(*e, line);
    }
  }
}

TEST(XidRobustness, HugeAndHostileInput) {
  std::string big(1 << 20, '9');
  EXPECT_FALSE(parse_xid_line("NVRM: Xid (PCI:0000:05:00): " + big + ", x"));
  EXPECT_FALSE(parse_xid_line("NVRM: Xid (PCI:" + big + ":05:00): 79, x"));
  // A bracket that holds no kernel time does not start a kernel message.
  EXPECT_FALSE(parse_xid_line("[" + big + ".1] NVRM: Xid (PCI:0000:05:00): 79, pid=7, x"));
  const auto e = parse_xid_line("NVRM: Xid (PCI:0000:05:00): 79, pid=" + big + ", x");
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->seconds_since_boot);
  EXPECT_FALSE(e->pid);
  const char raw[] = "NVRM: Xid (PCI:0000:05:00): 79, pid=7, name=\xff\xfe\x80, \xc3\x28\0tail";
  const auto binary = parse_xid_line(std::string_view(raw, sizeof raw - 1));
  ASSERT_TRUE(binary);
  EXPECT_EQ(binary->process_name, "\xff\xfe\x80");
  EXPECT_EQ(binary->message, std::string("\xc3\x28\0tail", 7));
}

// ---- catalog

XidInfo describe(unsigned xid, std::string message = "") {
  XidEvent e;
  e.xid = xid;
  e.message = std::move(message);
  return describe_xid(e);
}

TEST(XidCatalog, ActionOfEveryKnownXid) {
  const std::vector<std::pair<unsigned, XidAction>> table = {
      {13, XidAction::ApplicationFault}, {31, XidAction::ApplicationFault},
      {43, XidAction::Secondary},        {45, XidAction::Secondary},
      {48, XidAction::ResetGpu},         {62, XidAction::ResetGpu},
      {63, XidAction::Informational},    {64, XidAction::ResetGpu},
      {68, XidAction::ApplicationFault}, {74, XidAction::CheckNvlink},
      {79, XidAction::PowerCycle},       {92, XidAction::Trend},
      {94, XidAction::ApplicationFault}, {95, XidAction::ResetGpu},
      {119, XidAction::ResetGpu},        {120, XidAction::ResetGpu},
  };
  for (const auto& [xid, action] : table) {
    const XidInfo info = describe(xid);
    EXPECT_EQ(info.xid, xid);
    EXPECT_EQ(info.action, action) << xid;
    EXPECT_FALSE(info.meaning.empty()) << xid;
    EXPECT_FALSE(info.advice.empty()) << xid;
    EXPECT_LT(info.advice.size(), 200u) << "advice is short: " << xid;
  }
  EXPECT_EQ(describe(79).meaning, "GPU has fallen off the bus");
  EXPECT_NE(describe(79).advice.find("cannot help"), std::string::npos);
  EXPECT_NE(describe(48).advice.find("63 or 64"), std::string::npos);
}

TEST(XidCatalog, UnknownXidPointsAtNvidiasCatalog) {
  const XidInfo info = describe(999);
  EXPECT_EQ(info.action, XidAction::Unknown);
  EXPECT_NE(info.meaning.find("999"), std::string::npos);
  EXPECT_NE(info.advice.find("https://docs.nvidia.com/deploy/xid-errors/"), std::string::npos);
}

TEST(XidCatalog, RecoveryActionOf154ComesFromTheMessage) {
  const std::string from = "GPU recovery action changed from 0x0 (None) to ";
  EXPECT_EQ(describe(154, from + "0x1 (GPU Reset Required)").action, XidAction::ResetGpu);
  EXPECT_EQ(describe(154, from + "0x2 (Node Reboot Required)").action, XidAction::NodeReboot);
  EXPECT_EQ(describe(154, from + "0x3 (Drain P2P)").action, XidAction::DrainAndReset);
  EXPECT_EQ(describe(154, from + "0x4 (Drain and Reset)").action, XidAction::DrainAndReset);
  EXPECT_EQ(describe(154, "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)")
                .action,
            XidAction::None);
  EXPECT_NE(describe(154, from + "0x3 (Drain P2P)").advice.find("peer-to-peer"), std::string::npos);
  EXPECT_EQ(describe(154, from + "0x1 (GPU Reset Req").action, XidAction::ResetGpu)
      << "the complete number still names the action";
  EXPECT_EQ(describe(154, from + "0x1").action, XidAction::Unknown) << "may be cut from 0x1x";
  EXPECT_EQ(describe(154, from + "0x").action, XidAction::Unknown);
  EXPECT_EQ(describe(154, "GPU recovery action changed from 0x0 (None)").action,
            XidAction::Unknown);
  EXPECT_EQ(describe(154, from + "0x9 (Something New)").action, XidAction::Unknown);
  EXPECT_EQ(describe(154).meaning, "GPU recovery action changed");
}

TEST(XidCatalog, ActionNames) {
  EXPECT_EQ(xid_action_name(XidAction::ApplicationFault), "application-fault");
  EXPECT_EQ(xid_action_name(XidAction::Secondary), "secondary");
  EXPECT_EQ(xid_action_name(XidAction::ResetGpu), "reset-gpu");
  EXPECT_EQ(xid_action_name(XidAction::PowerCycle), "power-cycle");
  EXPECT_EQ(xid_action_name(XidAction::Informational), "informational");
  EXPECT_EQ(xid_action_name(XidAction::Trend), "trend");
  EXPECT_EQ(xid_action_name(XidAction::CheckNvlink), "check-nvlink");
  EXPECT_EQ(xid_action_name(XidAction::DrainAndReset), "drain-and-reset");
  EXPECT_EQ(xid_action_name(XidAction::NodeReboot), "node-reboot");
  EXPECT_EQ(xid_action_name(XidAction::None), "none");
  EXPECT_EQ(xid_action_name(XidAction::Unknown), "unknown");
}

}  // namespace
}  // namespace gpureap
