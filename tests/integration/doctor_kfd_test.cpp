// `gpureap doctor` on ROCm's KFD processes, laid out as the kernel shows them
// (<sys>/class/kfd/kfd/proc/<pid>/vram_<gpu_id>, the topology mapping gpu_id to a PCI address)
// for real processes: one whose job is over (its process-group leader exited), a zombie, a PID
// that has exited, and a running job in a session of its own. The first three are found, each
// with its VRAM per GPU; the running job is not. A hostile process name reaches the terminal
// escaped.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "doctor_support.hpp"
#include "drm_host_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

constexpr std::uint64_t kKfdMiB = 1024 * 1024;

// `sleep 1000` run with `name` as its argv[0] (what ps and doctor show), holding `kfd` open as a
// ROCm process holds /dev/kfd, started as `how` says.
// Group: its own process group, whose leader (an intermediate process) has exited.
// Session: a session of its own (a running job's leader).
enum class KfdStart { Group, Session };
struct KfdSleeper {
  pid_t pid = -1;
  bool ours = false;  // our child (Session), or a grandchild init reaps (Group)
  KfdSleeper(KfdStart how, const std::string& name, const std::string& kfd) : ours(how == KfdStart::Session) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    const pid_t first = ::fork();
    if (first == 0) {
      ::close(fds[0]);
      if (how == KfdStart::Session) {
        ::setsid();
      } else {
        ::setpgid(0, 0);
        if (::fork() != 0) ::_exit(0);  // the group's leader leaves; its child stays in the group
      }
      (void)::open(kfd.c_str(), O_RDWR);  // kept across exec
      const pid_t self = ::getpid();
      (void)!::write(fds[1], &self, sizeof self);
      ::close(fds[1]);
      ::execl("/bin/sleep", name.c_str(), "1000", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    (void)!::read(fds[0], &pid, sizeof pid);
    ::close(fds[0]);
    if (how == KfdStart::Group) ::waitpid(first, nullptr, 0);
  }
  ~KfdSleeper() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    if (ours) ::waitpid(pid, nullptr, 0);
  }
  KfdSleeper(const KfdSleeper&) = delete;
  KfdSleeper& operator=(const KfdSleeper&) = delete;
};

char kfd_state_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

void kfd_process_dir(const SimHost& host, pid_t pid, std::uint64_t vram_mib) {
  const std::string dir = host.state_dir() + "/sys/class/kfd/kfd/proc/" + std::to_string(pid);
  write_file(dir + "/pasid", "32770\n");
  write_file(dir + "/vram_46412", std::to_string(vram_mib * kKfdMiB) + "\n");
  write_file(dir + "/sdma_46412", "0\n");
}

TEST(DoctorKfd, ProcessesWhoseJobIsOverAreFoundWithTheirVramAndARunningJobIsNot) {
  SimHost host({"--gpus", "1"});
  const std::string pci = "0000:03:00.0";
  lay_out_amd_gpu(host, pci, {{"renderD128", 128}});
  const std::string topology = host.state_dir() + "/sys/class/kfd/kfd/topology/nodes";
  write_file(topology + "/0/gpu_id", "0\n");
  write_file(topology + "/1/gpu_id", "46412\n");
  write_file(topology + "/1/properties", "location_id 768\ndomain 0\n");

  const std::string kfd = std::filesystem::canonical(host.dev_dir()).string() + "/kfd";
  write_file(kfd, "");
  const KfdSleeper orphan(KfdStart::Group, "kfd\x1b]0;pwned\x07", kfd);
  const KfdSleeper running(KfdStart::Session, "kfd-running", kfd);
  const pid_t zombie = ::fork();
  if (zombie == 0) ::_exit(0);
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  ASSERT_GT(orphan.pid, 0);
  ASSERT_GT(running.pid, 0);
  for (int i = 0; i < 200 && kfd_state_of(zombie) != 'Z'; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(kfd_state_of(zombie), 'Z');
  kfd_process_dir(host, orphan.pid, 3072);
  kfd_process_dir(host, running.pid, 1024);
  kfd_process_dir(host, zombie, 512);
  kfd_process_dir(host, gone, 256);

  int rc = -1;
  const auto report = doctor_json(host, {"--settle", "0"}, &rc);
  const auto found = findings(report, "kfd-process-left-behind");
  ASSERT_EQ(found.size(), 3u) << report["findings"].dump(2);
  std::map<pid_t, nlohmann::json> by_pid;
  for (const auto& f : found) by_pid[f["evidence"]["pid"].get<pid_t>()] = f;
  EXPECT_FALSE(by_pid.count(running.pid)) << "a running job in its own session is not left behind";

  const auto& left = by_pid[orphan.pid];
  EXPECT_EQ(left["severity"], "warning");
  EXPECT_EQ(left["evidence"]["reason"], "group-leader-gone");
  EXPECT_EQ(left["evidence"]["vram_bytes"], 3072 * kKfdMiB);
  ASSERT_EQ(left["evidence"]["vram"].size(), 1u);
  EXPECT_EQ(left["evidence"]["vram"][0]["pci_bus_id"], pci);
  EXPECT_EQ(left["evidence"]["vram"][0]["gpu_id"], 46412);
  EXPECT_EQ(left["evidence"]["command"], "kfd\x1b]0;pwned\x07 1000");  // JSON keeps the bytes, escaped by JSON
  EXPECT_EQ(left["remedies"][0]["command"], "gpureap ps");
  EXPECT_TRUE(has_remedy(left, "gpureap kill " + std::to_string(orphan.pid))) << left.dump(2);

  const auto& undead = by_pid[zombie];
  EXPECT_EQ(undead["evidence"]["reason"], "zombie");
  EXPECT_EQ(undead["evidence"]["state"], "Z");
  EXPECT_FALSE(has_remedy(undead, "gpureap kill")) << "a zombie cannot be killed: " << undead.dump(2);

  const auto& exited = by_pid[gone];
  EXPECT_EQ(exited["evidence"]["reason"], "gone");
  EXPECT_TRUE(exited["evidence"]["command"].is_null());
  EXPECT_EQ(exited["evidence"]["vram_bytes"], 256 * kKfdMiB);
  EXPECT_FALSE(has_remedy(exited, "gpureap kill")) << exited.dump(2);
  // What a reset of its GPU, the one way short of a reboot to free it, would end.
  ASSERT_EQ(exited["evidence"]["resets"].size(), 1u) << exited.dump(2);
  EXPECT_EQ(exited["evidence"]["resets"][0]["gpus"][0]["pci_bus_id"], pci);
  EXPECT_EQ(exited["evidence"]["resets"][0]["gpus"][0]["kfd_pids"].size(), 4u) << exited.dump(2);
  for (const auto& f : found) {
    for (const auto& remedy : f["remedies"]) EXPECT_FALSE(remedy["applied_by_fix"].get<bool>()) << remedy.dump();
  }

  // What a person reads: the process's chosen name shown as inert text.
  const CommandResult text = host.gpureap({"doctor", "--no-kernel-log", "--settle", "0"});
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(kfd\\x1b]0;pwned\\x07 1000)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("KFD process " + std::to_string(orphan.pid)), std::string::npos) << text.out;

  // export's quick checks read only the GPU holders' side of /proc: the same three, no more.
  const CommandResult metrics = host.gpureap({"export", "--once"});
  std::istringstream lines(metrics.out);
  std::string series;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("gpureap_doctor_finding{", 0) == 0 && line.find("id=\"kfd-process-left-behind\"") != std::string::npos) {
      series = line;
    }
  }
  EXPECT_NE(series.find("severity=\"warning\""), std::string::npos) << metrics.out;
  EXPECT_EQ(series.substr(series.rfind(' ') + 1), "3") << metrics.out;
  ::waitpid(zombie, nullptr, 0);
}

}  // namespace
}  // namespace gpureap::test
