// Xid events from a saved kernel log become findings on the right GPU, with the PID named.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <cstring>
#include <ctime>
#include <fstream>

#include <gtest/gtest.h>

#include "doctor_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

// "00000000:1A:00.0" -> "0000:1a:00", as the driver prints it in Xid lines.
std::string xid_pci(const std::string& nvml_bus_id) {
  std::string s = nvml_bus_id.substr(4, 10);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const nlohmann::json* xid_finding(const std::vector<nlohmann::json>& list, unsigned xid) {
  for (const auto& f : list) {
    if (f["evidence"]["xid"] == xid) return &f;
  }
  return nullptr;
}

TEST(DoctorXid, EveryLineFormatMapsToTheGpuAndPid) {
  SimHost host;
  const auto ps = host.ps_json();
  const std::string gpu0 = xid_pci(gpu_entry(ps, 0)["pci_bus_id"]);
  const std::string gpu1 = xid_pci(gpu_entry(ps, 1)["pci_bus_id"]);
  const pid_t me = ::getpid();
  const std::string log = host.state_dir() + "/kernel.log";
  std::ofstream(log)
      << "[    3.943049] NVRM: Persistence mode is deprecated and will be removed in a future release.\n"
      << "[ 5678.901234] NVRM: Xid (PCI:" << gpu0 << "): 13, pid=" << me << ", name=python3, Graphics Exception\n"
      << "Nov 29 18:29:40 node1 kernel: NVRM: Xid (PCI:" << gpu0 << "): 13, pid=999999, name=python3, Graphics Exception\n"
      << "2026-11-29T18:30:00+0000 node1 kernel: NVRM: Xid (PCI:" << gpu1
      << "): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
      << "6,1234,5678901,-;NVRM: Xid (PCI:" << gpu0 << " GPU-I:02 GPU-CI:01): 31, pid=4242, name=python3, Ch 00000010\n"
      << "[Sun Nov 29 18:31:00 2026] NVRM: Xid (PCI:" << gpu0
      << "): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)\n"
      << "[ 6000.000000] NVRM: Xid (0000:7f:00): 14, Channel 00000001\n";
  int rc = -1;
  const auto report = doctor_json(host, {"--kernel-log", log}, &rc);
  EXPECT_EQ(rc, 2) << "a GPU off the bus is critical: " << report.dump(2);

  const auto on0 = findings(report, "xid", 0);
  const auto* app = xid_finding(on0, 13);
  ASSERT_NE(app, nullptr) << report["findings"].dump(2);
  EXPECT_EQ((*app)["severity"], "info") << "an application fault leaves the GPU healthy";
  EXPECT_EQ((*app)["evidence"]["count"], 2);
  EXPECT_EQ((*app)["evidence"]["action"], "application-fault");
  ASSERT_EQ((*app)["evidence"]["pids"].size(), 2u);
  EXPECT_EQ((*app)["evidence"]["pids"][0]["pid"], me);
  EXPECT_TRUE((*app)["evidence"]["pids"][0]["running"].get<bool>());
  EXPECT_FALSE((*app)["evidence"]["pids"][1]["running"].get<bool>());

  const auto* mig = xid_finding(on0, 31);
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ((*mig)["evidence"]["gpu_instance"], 2);
  EXPECT_EQ((*mig)["evidence"]["compute_instance"], 1);

  const auto* recovery = xid_finding(on0, 154);
  ASSERT_NE(recovery, nullptr);
  EXPECT_EQ((*recovery)["severity"], "critical");
  EXPECT_EQ((*recovery)["evidence"]["action"], "reset-gpu");
  EXPECT_TRUE(has_remedy(*recovery, "nvidia-smi -r -i " + gpu_entry(ps, 0)["uuid"].get<std::string>()));

  const auto on1 = findings(report, "xid", 1);
  const auto* fell = xid_finding(on1, 79);
  ASSERT_NE(fell, nullptr);
  EXPECT_EQ((*fell)["severity"], "critical");
  EXPECT_EQ((*fell)["evidence"]["action"], "power-cycle");
  EXPECT_TRUE((*fell)["evidence"]["pids"].empty()) << "pid='<unknown>' names no process";

  // A GPU this host's driver does not know keeps its PCI location and no index.
  bool unmapped = false;
  for (const auto& f : findings(report, "xid")) {
    if (f["gpu"].is_null() && f["evidence"]["pci"] == "0000:7f:00" && f["evidence"]["xid"] == 14) unmapped = true;
  }
  EXPECT_TRUE(unmapped) << report["findings"].dump(2);
}

// Every command the advice prints names the GPU by UUID, or by the event's bus id when the
// driver no longer lists a GPU there: an index names whichever GPU the driver counts Nth when
// the command runs, and a GPU that fell off the bus shifts those after it.
TEST(DoctorXid, TheAdviceNamesTheGpuByUuidOrBusIdNeverByIndex) {
  SimHost host;
  const auto ps = host.ps_json();
  const std::string uuid1 = gpu_entry(ps, 1)["uuid"];
  const std::string log = host.state_dir() + "/kernel.log";
  std::ofstream(log) << "[ 10.000000] NVRM: Xid (PCI:" << xid_pci(gpu_entry(ps, 1)["pci_bus_id"])
                     << "): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)\n"
                     << "[ 11.000000] NVRM: Xid (PCI:0000:7f:00): 154, GPU recovery action changed from 0x0 (None) to "
                        "0x1 (GPU Reset Required)\n";
  int rc = -1;
  const auto report = doctor_json(host, {"--kernel-log", log}, &rc);
  const auto on_gpu1 = findings(report, "xid", 1);
  const auto* on1 = xid_finding(on_gpu1, 154);
  ASSERT_NE(on1, nullptr) << report["findings"].dump(2);
  EXPECT_TRUE(has_remedy(*on1, "gpureap kill --gpu " + uuid1)) << (*on1)["remedies"].dump(2);
  EXPECT_TRUE(has_remedy(*on1, "nvidia-smi -r -i " + uuid1)) << (*on1)["remedies"].dump(2);
  const auto all = findings(report, "xid");
  const nlohmann::json* gone = nullptr;
  for (const auto& f : all) {
    if (f["gpu"].is_null() && f["evidence"]["pci"] == "0000:7f:00") gone = &f;
  }
  ASSERT_NE(gone, nullptr) << report["findings"].dump(2);
  EXPECT_TRUE(has_remedy(*gone, "nvidia-smi -r -i 00000000:7F:00.0")) << (*gone)["remedies"].dump(2);
  for (const auto& f : all) {
    for (const auto& r : f["remedies"]) {
      const std::string command = r["command"].is_string() ? r["command"].get<std::string>() : "";
      if (command.rfind("nvidia-smi", 0) != 0 && command.rfind("gpureap kill", 0) != 0) continue;
      EXPECT_TRUE(command.find(" -i ") != std::string::npos || command.find(" --gpu ") != std::string::npos)
          << "a command that names no GPU acts on every GPU: " << command;
      for (const char* index : {" -i 0", " -i 1", " --gpu 0", " --gpu 1", " --gpu N"}) {
        const std::string tail = command.substr(command.size() - std::min(command.size(), std::strlen(index)));
        EXPECT_NE(tail, index) << "named by index: " << command;
      }
    }
  }
}

TEST(DoctorXid, SinceIgnoresOldEventsWhoseAgeIsKnownAndKeepsTheRest) {
  SimHost host;
  const auto ps = host.ps_json();
  const std::string gpu0 = xid_pci(gpu_entry(ps, 0)["pci_bus_id"]);
  const std::string gpu1 = xid_pci(gpu_entry(ps, 1)["pci_bus_id"]);
  const std::time_t recent = std::time(nullptr) - 60;
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S+0000", std::gmtime(&recent));
  const std::string log = host.state_dir() + "/kernel.log";
  std::ofstream(log) << "2020-01-01T00:00:00+0000 node1 kernel: NVRM: Xid (PCI:" << gpu1
                     << "): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
                     << stamp << " node1 kernel: NVRM: Xid (PCI:" << gpu0 << "): 13, pid=77, name=python3, Graphics Exception\n"
                     << "[ 5678.901234] NVRM: Xid (PCI:" << gpu0 << "): 31, pid=4242, name=python3, Ch 00000010\n";
  int rc = -1;
  const auto all = doctor_json(host, {"--kernel-log", log}, &rc);
  EXPECT_EQ(rc, 2) << "without --since the old Xid 79 counts";
  const auto recent_only = doctor_json(host, {"--kernel-log", log, "--since", "1h"}, &rc);
  EXPECT_EQ(rc, 0) << recent_only.dump(2);
  EXPECT_EQ(xid_finding(findings(recent_only, "xid", 1), 79), nullptr) << "six years old: ignored";
  const auto on0 = findings(recent_only, "xid", 0);
  const auto* fresh = xid_finding(on0, 13);
  ASSERT_NE(fresh, nullptr) << recent_only.dump(2);
  EXPECT_NEAR((*fresh)["evidence"]["last"]["age_seconds"].get<double>(), 60.0, 30.0);
  const auto* unknown = xid_finding(on0, 31);
  ASSERT_NE(unknown, nullptr) << "a dmesg time in a saved file may be from another boot: kept";
  EXPECT_TRUE((*unknown)["evidence"]["last"]["age_seconds"].is_null());
  const std::string notes = recent_only["notes"].dump();
  EXPECT_NE(notes.find("1 Xid event(s) older than --since were ignored"), std::string::npos) << notes;
  EXPECT_NE(notes.find("unknown age were kept"), std::string::npos) << notes;
  EXPECT_EQ(host.gpureap({"doctor", "--kernel-log", log, "--since", "soon"}).exit_code, 11);
}

TEST(DoctorXid, ALogWithoutXidsAddsNothing) {
  SimHost host;
  const std::string log = host.state_dir() + "/quiet.log";
  std::ofstream(log) << "[    0.863222] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n";
  int rc = -1;
  const auto report = doctor_json(host, {"--kernel-log", log}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(findings(report, "xid").empty());
}

// Text a user controls can reach the kernel log (a process name, a path the kernel echoes, a
// message written through /dev/kmsg by a daemon): a driver report there is no Xid.
TEST(DoctorXid, ForgedLinesWithoutTheDriverPrefixYieldNoXid) {
  SimHost host;
  const std::string gpu0 = xid_pci(gpu_entry(host.ps_json(), 0)["pci_bus_id"]);
  const std::string report_text = "NVRM: Xid (PCI:" + gpu0 + "): 79, pid=1, name=x, GPU has fallen off the bus.";
  const std::string log = host.state_dir() + "/kernel.log";
  std::ofstream(log) << "[ 5678.901234] python3[4242]: segfault at 0 ip 0 sp 0 error 4 in " << report_text << "\n"
                     << "Nov 29 18:29:40 node1 myapp[77]: " << report_text << "\n"
                     << "Nov 29 18:29:40 node1 kernel: audit: comm=\"" << report_text << "\"\n"
                     << "14,1234,5678901,-;" << report_text << "\n";
  int rc = -1;
  const auto report = doctor_json(host, {"--kernel-log", log}, &rc);
  EXPECT_TRUE(findings(report, "xid").empty()) << report["findings"].dump(2);
  EXPECT_EQ(rc, 0) << report.dump(2);
}

// A Slurm health check must never hang: inputs that are not a saved log are an error, at once.
TEST(DoctorInput, KernelLogThatIsNotARegularFileIsExit11WithOneLine) {
  SimHost host;
  const std::string fifo = host.state_dir() + "/kernel.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), fifo, host.state_dir()}) {
    const auto result = host.gpureap({"doctor", "--kernel-log", path});
    EXPECT_EQ(result.exit_code, 11) << path << ": " << result.out << result.err;
    EXPECT_NE(result.err.find(path), std::string::npos) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;
  }
}

TEST(DoctorInput, BadIpcMinAgeIsExit11) {
  SimHost host;
  for (const char* age : {"nan", "-5", "1e300", "inf", "31d", "soon"}) {
    const auto result = host.gpureap({"doctor", "--no-kernel-log", std::string("--ipc-min-age=") + age});
    EXPECT_EQ(result.exit_code, 11) << "--ipc-min-age '" << age << "': " << result.err;
  }
  EXPECT_EQ(host.gpureap({"doctor", "--no-kernel-log", "--ipc-min-age", "2h"}).exit_code, 0);
}

}  // namespace
}  // namespace gpureap::test
