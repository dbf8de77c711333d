// The simulated nvidia-smi (build/sim/bin/nvidia-smi): CSV queries that report exactly what
// NVML reports, and a GPU reset that refuses as the real one does. Parts that need root skip
// without it; the non-root refusal runs as nobody when the suite runs as root.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "harness.hpp"

namespace gpusim::test {
namespace {

CommandResult smi(const std::string& state, const std::vector<std::string>& args,
                  const std::string& gen = "r550") {
  ::setenv("GPUSIM_STATE_DIR", state.c_str(), 1);
  ::setenv("GPUSIM_NVML_LIBRARY", driver_path(gen).c_str(), 1);
  std::vector<std::string> argv = {GPUSIM_SMI_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

const std::vector<std::string> kAppsCsv = {"--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"};

class Smi : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2"}).exit_status, 0); }
  void TearDown() override { ::unsetenv("GPUSIM_NVML_LIBRARY"); }
  TempDir dir;
};

TEST_F(Smi, IsFoundOnPathAsNvidiaSmi) {
  std::string bin = GPUSIM_SMI_BINARY;
  std::string bindir = bin.substr(0, bin.rfind('/'));
  EXPECT_EQ(bin.substr(bin.rfind('/') + 1), "nvidia-smi");
  ::setenv("GPUSIM_STATE_DIR", dir.path().c_str(), 1);
  auto r = run_command({"/bin/sh", "-c", "PATH='" + bindir + "':\"$PATH\" nvidia-smi --query-gpu=index --format=csv,noheader"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out, "0\n1\n");
}

TEST_F(Smi, QueryGpu) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "persistence=0"}).exit_status, 0);
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err);
  ASSERT_TRUE(p) << err;
  auto r = smi(dir.path(), {"--query-gpu=index,pci.bus_id,persistence_mode,memory.used", "--format=csv,noheader,nounits"});
  EXPECT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "0, 00000000:17:00.0, Enabled, 1024\n1, 00000000:2A:00.0, Disabled, 0\n");
  r = smi(dir.path(), {"--query-gpu", "index,memory.used,memory.total", "--format", "csv", "-i", "0"});
  EXPECT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "index, memory.used [MiB], memory.total [MiB]\n0, 1024 MiB, 81920 MiB\n");
  r = smi(dir.path(), {"--query-gpu=name,uuid", "--format=csv,noheader", "--id=00000000:2A:00.0"});
  EXPECT_EQ(r.out, "NVIDIA H100 80GB HBM3, GPU-5b3f0c01-0000-4000-8000-000000000001\n") << r.err;
}

TEST_F(Smi, QueryComputeAppsReportsWhatNvmlReports) {
  std::string err;
  auto a = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--alloc", "0:512MiB", "--name", "/usr/bin/python3"}, &err);
  ASSERT_TRUE(a) << err;
  auto b = SimProcess::start(dir.path(), {"--alloc", "1:2GiB", "--workers", "1"}, &err);
  ASSERT_TRUE(b) << err;
  auto orphan = SimProcess::start(dir.path(), {"--alloc", "1:3GiB", "--workers", "1"}, &err);
  ASSERT_TRUE(orphan) << err;
  orphan->signal_owner(SIGKILL);  // its worker keeps 3 GiB, still listed under the dead owner
  for (const std::string& gen : all_generations()) {
    auto r = smi(dir.path(), kAppsCsv, gen);
    EXPECT_EQ(r.exit_status, 0) << gen << r.err;
    EXPECT_EQ(r.out, std::to_string(a->pid()) + ", 1536\n" + std::to_string(b->pid()) + ", 2048\n" +
                         std::to_string(orphan->pid()) + ", 3072\n")
        << gen;
  }
  auto r = smi(dir.path(), {"--query-compute-apps=pid,process_name,used_memory", "--format=csv", "-i", "0"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out, "pid, process_name, used_gpu_memory [MiB]\n" + std::to_string(a->pid()) +
                       ", /usr/bin/python3, 1536 MiB\n");
}

TEST_F(Smi, QueryComputeAppsEdgeCases) {
  auto r = smi(dir.path(), kAppsCsv);
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.out, "") << "no processes, no rows";
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "0", "memory_not_available=1"}).exit_status, 0);
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err);
  ASSERT_TRUE(p) << err;
  r = smi(dir.path(), kAppsCsv);
  EXPECT_EQ(r.out, std::to_string(p->pid()) + ", [N/A]\n");
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "lost=1"}).exit_status, 0);
  r = smi(dir.path(), kAppsCsv);
  EXPECT_EQ(r.exit_status, 15) << "GPU is lost";
  EXPECT_EQ(r.out, std::to_string(p->pid()) + ", [N/A]\n") << "the other GPU is still listed";
}

TEST_F(Smi, RejectsWhatItDoesNotSimulate) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-q"}, {"--query-gpu=index"}, {"--query-gpu=index", "--format=xml"}, {"-r", "--format=csv"},
           {"-r", "--query-gpu=index", "--format=csv"}, {"-i"}, {"-L"}}) {
    auto r = smi(dir.path(), args);
    EXPECT_EQ(r.exit_status, 2) << testing::PrintToString(args);
    EXPECT_NE(r.err.find("simulated nvidia-smi: unsupported arguments:"), std::string::npos) << r.err;
  }
  auto r = smi(dir.path(), {"--query-gpu=index,colour", "--format=csv"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.out.find("Field \"colour\" is not a valid field to query."), std::string::npos) << r.out;
}

TEST_F(Smi, NoDriverNoDevice) {
  TempDir empty;
  for (const auto& args : std::vector<std::vector<std::string>>{kAppsCsv, {"-r", "-i", "0"}}) {
    auto r = smi(empty.path(), args);
    EXPECT_EQ(r.exit_status, 9);
    EXPECT_NE(r.out.find("couldn't communicate with the NVIDIA driver"), std::string::npos) << r.out;
  }
  auto r = smi(dir.path(), {"--query-gpu=index", "--format=csv", "-i", "7"});
  EXPECT_EQ(r.exit_status, 6);
  EXPECT_EQ(r.out, "No devices were found\n");
  r = smi(dir.path(), {"-r", "-i", "7"});
  EXPECT_EQ(r.exit_status, 6);
}

TEST_F(Smi, ResetNeedsRoot) {
  std::vector<std::string> argv = {GPUSIM_SMI_BINARY, "-r", "-i", "0"};
  if (::geteuid() == 0) {
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);  // nobody must still find the machine
    argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            reachable_by_other_users(GPUSIM_SMI_BINARY), "-r", "-i", "0"};
    ::setenv("GPUSIM_NVML_LIBRARY", reachable_by_other_users(driver_path("r550")).c_str(), 1);
  }
  ::setenv("GPUSIM_STATE_DIR", dir.path().c_str(), 1);
  auto r = run_command(argv);
  EXPECT_EQ(r.exit_status, 4) << r.out << r.err;
  EXPECT_EQ(r.out, "The following GPUs could not be reset:\n  GPU 00000000:17:00.0: Insufficient Permissions\n");
}

}  // namespace
}  // namespace gpusim::test
