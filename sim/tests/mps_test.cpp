// The simulated MPS: a control daemon with its documented commands, one server per user
// started on demand, clients listed with their memory (or folded into the server where the
// driver has no MPS list), a client's signal death faulting its server and the server's other
// clients, and terminate_client ending one client while the server and the others go on.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "harness.hpp"

namespace gpusim::test {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Mps : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(ctl(state_.path(), {"init", "--gpus", "1"}).exit_status, 0);
    pipe_dir_ = mps_.path() + "/pipe";
    log_dir_ = mps_.path() + "/log";
    ::setenv("GPUSIM_STATE_DIR", state_.path().c_str(), 1);
    ::setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir_.c_str(), 1);
    ::setenv("CUDA_MPS_LOG_DIRECTORY", log_dir_.c_str(), 1);
    CommandResult r = run_command({GPUSIM_MPS_CONTROL_BINARY, "-d"});
    ASSERT_EQ(r.exit_status, 0) << r.err;
    daemon_pid_ = std::atoi(slurp(pipe_dir_ + "/nvidia-cuda-mps-control.pid").c_str());
    ASSERT_GT(daemon_pid_, 1);
  }
  void TearDown() override {
    control("quit");
    if (daemon_pid_ > 1 && process_running(daemon_pid_)) kill_and_wait(daemon_pid_);
    ::unsetenv("CUDA_MPS_PIPE_DIRECTORY");
    ::unsetenv("CUDA_MPS_LOG_DIRECTORY");
  }

  std::string control(const std::string& line) {
    return trim(run_command({GPUSIM_MPS_CONTROL_BINARY}, line + "\n").out);
  }
  unsigned server() { return static_cast<unsigned>(std::atoi(control("get_server_list").c_str())); }
  std::string status(unsigned server_pid) { return control("get_server_status " + std::to_string(server_pid)); }

  TempDir state_;
  TempDir mps_;
  std::string pipe_dir_, log_dir_;
  pid_t daemon_pid_ = -1;
};

std::string fmt_terminate(unsigned server_pid, unsigned client_pid) {
  return "terminate_client " + std::to_string(server_pid) + " " + std::to_string(client_pid);
}

using Rows = std::map<unsigned, std::uint64_t>;
Rows rows_of(Nvml& nvml, const char* symbol, std::size_t stride) {
  std::vector<nvmlProcessDetail_v1_t> recs;
  EXPECT_EQ(nvml.processes(symbol, nvml.device(0), stride, &recs), NVML_SUCCESS) << symbol;
  Rows out;
  for (const auto& r : recs) out[r.pid] = r.usedGpuMemory;
  return out;
}

TEST_F(Mps, DaemonStartsNoServerUntilAClientComesAndQuitRemovesItsPipeFiles) {
  // What the real R550 daemon makes (docs/simulator.md, MPS): a pid file anyone may write.
  struct stat made {};
  ASSERT_EQ(::stat((pipe_dir_ + "/nvidia-cuda-mps-control.pid").c_str(), &made), 0);
  EXPECT_EQ(made.st_mode & 07777, 0666u);
  ASSERT_EQ(::stat((pipe_dir_ + "/control_privileged").c_str(), &made), 0);
  EXPECT_TRUE(S_ISSOCK(made.st_mode));
  EXPECT_EQ(made.st_mode & 07777, 0755u);
  ASSERT_EQ(::stat((pipe_dir_ + "/log").c_str(), &made), 0);
  EXPECT_TRUE(S_ISFIFO(made.st_mode));
  EXPECT_EQ(control("get_server_list"), "");
  EXPECT_EQ(control("ps"), "PID ID SERVER DEVICE NAMESPACE COMMAND");
  EXPECT_EQ(control("get_default_active_thread_percentage"), "100.0");
  EXPECT_EQ(control("no_such_command"), "Invalid command: no_such_command");
  CommandResult again = run_command({GPUSIM_MPS_CONTROL_BINARY, "-d"});
  EXPECT_EQ(again.exit_status, 1);
  EXPECT_NE(again.err.find("already running"), std::string::npos) << again.err;
  EXPECT_EQ(control("quit"), "");
  EXPECT_TRUE(eventually([&] { return !process_running(daemon_pid_); }));
  // As the real one: the pid file and the FIFO go, the sockets and the lock stay.
  struct stat st;
  EXPECT_NE(::stat((pipe_dir_ + "/nvidia-cuda-mps-control.pid").c_str(), &st), 0);
  EXPECT_NE(::stat((pipe_dir_ + "/log").c_str(), &st), 0);
  EXPECT_EQ(::stat((pipe_dir_ + "/control").c_str(), &st), 0);
  EXPECT_EQ(::stat((pipe_dir_ + "/control_lock").c_str(), &st), 0);
  EXPECT_NE(slurp(log_dir_ + "/control.log").find("Starting control daemon"), std::string::npos);
}

// Each driver generation lists the same MPS processes its own way (gpu-memory-facts.md §7).
class MpsListing : public Mps, public ::testing::WithParamInterface<std::string> {};

TEST_P(MpsListing, ServerOnDemandAndEachClientWithItsMemory) {
  const std::string gen = GetParam();
  auto a = SimProcess::start(state_.path(), {"--alloc", "0:1GiB"});
  ASSERT_TRUE(a);
  auto b = SimProcess::start(state_.path(), {"--alloc", "0:512MiB"});
  ASSERT_TRUE(b);
  const unsigned s = server();
  ASSERT_GT(s, 1u);
  EXPECT_TRUE(process_running(static_cast<pid_t>(s)));
  // As on a real machine, comm cuts both programs' names to the same 15 bytes.
  EXPECT_EQ(slurp("/proc/" + std::to_string(s) + "/comm"), "nvidia-cuda-mps\n");
  EXPECT_EQ(slurp("/proc/" + std::to_string(s) + "/cmdline").rfind(std::string("nvidia-cuda-mps-server\0", 23), 0), 0u);
  EXPECT_EQ(control("get_client_list " + std::to_string(s)), std::to_string(a->pid()) + "\n" + std::to_string(b->pid()));
  EXPECT_NE(control("ps").find(std::to_string(a->pid()) + " 0 " + std::to_string(s)), std::string::npos);
  // The server, not the client, holds the device files.
  bool client_holds_device = false, server_holds_device = false;
  for (const auto& f : open_files(a->pid())) client_holds_device |= f.find("/dev/nvidia0") != std::string::npos;
  for (const auto& f : open_files(s)) server_holds_device |= f.find("/dev/nvidia0") != std::string::npos;
  EXPECT_FALSE(client_holds_device);
  EXPECT_TRUE(server_holds_device);

  Nvml nvml(gen);
  ASSERT_EQ(nvml.init(state_.path()), NVML_SUCCESS);
  Rows compute = rows_of(nvml, "nvmlDeviceGetComputeRunningProcesses", sizeof(nvmlProcessInfo_v1_t));
  if (nvml.has("nvmlDeviceGetMPSComputeRunningProcesses")) {
    EXPECT_EQ(compute, (Rows{{s, 64 * MiB}}));
    Rows clients = rows_of(nvml, "nvmlDeviceGetMPSComputeRunningProcesses", sizeof(nvmlProcessInfo_v1_t));
    EXPECT_EQ(clients, (Rows{{a->pid(), 1 * GiB}, {b->pid(), 512 * MiB}}));
    if (nvml.has("nvmlDeviceGetMPSComputeRunningProcesses_v3")) {
      std::size_t stride = gen == "r550" ? 24 : 32;
      EXPECT_EQ(rows_of(nvml, "nvmlDeviceGetMPSComputeRunningProcesses_v3", stride), clients);
    }
  } else {
    // Older MPS: the server is the only CUDA process, with everything its clients hold.
    EXPECT_EQ(compute, (Rows{{s, 64 * MiB + 1 * GiB + 512 * MiB}}));
  }
}

INSTANTIATE_TEST_SUITE_P(Generations, MpsListing, ::testing::Values("r450", "r470", "r550"));

TEST_F(Mps, ClientKilledBySignalWithWorkOutstandingFaultsTheServerAndItsOtherClients) {
  auto a = SimProcess::start(state_.path(), {"--alloc", "0:1GiB"});
  ASSERT_TRUE(a);
  auto b = SimProcess::start(state_.path(), {"--alloc", "0:1GiB"});
  ASSERT_TRUE(b);
  const unsigned s = server();
  ASSERT_EQ(status(s), "ACTIVE");
  a->signal_owner(SIGKILL);
  EXPECT_TRUE(eventually([&] { return status(s) == "FAULT"; }));
  EXPECT_NE(slurp(log_dir_ + "/server.log").find("ended with work outstanding"), std::string::npos);
  EXPECT_TRUE(process_running(static_cast<pid_t>(b->pid())));  // hung, not gone
  std::string error;
  int exit_status = -1;
  EXPECT_FALSE(SimProcess::start(state_.path(), {"--alloc", "0:1GiB"}, &error, &exit_status));
  EXPECT_EQ(exit_status, 5) << error;
  EXPECT_NE(error.find("cudaErrorMpsServerNotReady"), std::string::npos) << error;
  // Once every affected client has exited the server takes clients again.
  b->signal_owner(SIGKILL);
  EXPECT_TRUE(eventually([&] { return status(s) == "ACTIVE"; }));
  EXPECT_TRUE(SimProcess::start(state_.path(), {"--alloc", "0:1GiB"}));
}

TEST_F(Mps, APlainSigtermIsASignalDeathToo) {
  auto a = SimProcess::start(state_.path(), {"--alloc", "0:1GiB"});
  ASSERT_TRUE(a);
  auto b = SimProcess::start(state_.path(), {"--alloc", "0:1GiB"});
  ASSERT_TRUE(b);
  const unsigned s = server();
  a->signal_owner(SIGTERM);
  EXPECT_EQ(a->wait_exit(std::chrono::seconds(5)), 128 + SIGTERM);
  EXPECT_TRUE(eventually([&] { return status(s) == "FAULT"; }));
}

TEST_F(Mps, TerminateClientEndsOneClientAndTheServerAndTheOtherClientGoOn) {
  auto a = SimProcess::start(state_.path(), {"--alloc", "0:1GiB"});
  ASSERT_TRUE(a);
  auto b = SimProcess::start(state_.path(), {"--alloc", "0:512MiB"});
  ASSERT_TRUE(b);
  const unsigned s = server();
  EXPECT_EQ(control(fmt_terminate(s, a->pid())), "");
  EXPECT_EQ(a->wait_exit(std::chrono::seconds(5)), 6);
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(state_.path()), NVML_SUCCESS);
  EXPECT_TRUE(eventually([&] {
    return rows_of(nvml, "nvmlDeviceGetMPSComputeRunningProcesses", sizeof(nvmlProcessInfo_v1_t)) ==
           Rows{{b->pid(), 512 * MiB}};
  }));
  nvmlMemory_v2_t mem{};
  mem.version = nvmlMemory_v2;
  ASSERT_EQ(nvml.memory_v2(nvml.device(0), &mem), NVML_SUCCESS);
  EXPECT_EQ(status(s), "ACTIVE");
  EXPECT_TRUE(process_running(static_cast<pid_t>(s)));
  EXPECT_TRUE(process_running(static_cast<pid_t>(b->pid())));
  EXPECT_EQ(control(fmt_terminate(s, 999999)), "Client 999999 not found on server " + std::to_string(s));
  EXPECT_EQ(control(fmt_terminate(1, b->pid())), "Server 1 not found");
}

TEST_F(Mps, AfterTerminateClientEndingTheClientBySignalHarmsNoOne) {
  auto a = SimProcess::start(state_.path(), {"--alloc", "0:1GiB", "--mps-on-terminate", "stay"});
  ASSERT_TRUE(a);
  auto b = SimProcess::start(state_.path(), {"--alloc", "0:1GiB"});
  ASSERT_TRUE(b);
  const unsigned s = server();
  EXPECT_EQ(control(fmt_terminate(s, a->pid())), "");
  EXPECT_TRUE(eventually([&] { return control("get_client_list " + std::to_string(s)) == std::to_string(b->pid()); }));
  EXPECT_TRUE(process_running(static_cast<pid_t>(a->pid())));
  a->signal_owner(SIGKILL);
  ::usleep(100 * 1000);
  EXPECT_EQ(status(s), "ACTIVE");
}

TEST_F(Mps, AClientOfAnotherUserWaitsUntilTheServersClientsAreDone) {
  if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs root and setpriv";
  // User 65534 must reach the state and the pipe directory.
  ::chmod(state_.path().c_str(), 0755);
  ::chmod(mps_.path().c_str(), 0755);
  const std::vector<std::string> as_nobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  auto theirs = SimProcess::start(state_.path(), {"--alloc", "0:1GiB", "--exit-after", "800"}, nullptr, nullptr, as_nobody);
  ASSERT_TRUE(theirs);
  const unsigned their_server = server();
  // Ours connects while their server has a client: it waits, and gets a server of its own
  // only once their client is done and their server has ended.
  auto ours = SimProcess::start(state_.path(), {"--alloc", "0:1GiB"});
  ASSERT_TRUE(ours);
  EXPECT_EQ(theirs->wait_exit(std::chrono::milliseconds(0)), 0) << "ours was served before theirs was done";
  EXPECT_FALSE(process_running(static_cast<pid_t>(their_server)));
  EXPECT_NE(server(), their_server);
  EXPECT_EQ(control("get_client_list " + std::to_string(server())), std::to_string(ours->pid()));
  EXPECT_NE(slurp(log_dir_ + "/control.log").find("waits: the server " + std::to_string(their_server) + " of uid 65534"),
            std::string::npos)
      << slurp(log_dir_ + "/control.log");
}

TEST_F(Mps, NvidiaSmiShowsClientsAsMTheServerAsCAndAContextOutsideMpsAsMPlusC) {
  auto client = SimProcess::start(state_.path(), {"--alloc", "0:1GiB"});
  ASSERT_TRUE(client);
  const unsigned s = server();
  // A process with an MPS context and one of its own outside the server (no daemon for it).
  ::setenv("CUDA_MPS_PIPE_DIRECTORY", "", 1);
  auto both = SimProcess::start(state_.path(), {"--alloc", "0:512MiB:M", "--alloc", "0:256MiB"});
  ASSERT_TRUE(both);
  ::setenv("GPUSIM_NVML_LIBRARY", driver_path("r550").c_str(), 1);
  CommandResult smi = run_command({GPUSIM_SMI_BINARY});
  ::unsetenv("GPUSIM_NVML_LIBRARY");
  ASSERT_EQ(smi.exit_status, 0) << smi.err;
  auto row = [&](unsigned pid) {
    std::istringstream in(smi.out);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string bar, gpu, gi, ci, p, type;
      words >> bar >> gpu >> gi >> ci >> p >> type;
      if (p == std::to_string(pid)) return type;
    }
    return std::string("(missing)");
  };
  EXPECT_EQ(row(client->pid()), "M") << smi.out;
  EXPECT_EQ(row(s), "C") << smi.out;
  EXPECT_EQ(row(both->pid()), "M+C") << smi.out;
  EXPECT_NE(smi.out.find("1024MiB"), std::string::npos) << smi.out;
}

TEST_F(Mps, PipeAndLogDirectoriesSurviveADeadDaemon) {
  kill_and_wait(daemon_pid_);
  struct stat st;
  EXPECT_EQ(::stat((pipe_dir_ + "/nvidia-cuda-mps-control.pid").c_str(), &st), 0);
  EXPECT_EQ(::stat((pipe_dir_ + "/control").c_str(), &st), 0);
  CommandResult r = run_command({GPUSIM_MPS_CONTROL_BINARY}, std::string("get_server_list\n"));
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.err.find("Cannot find MPS control daemon"), std::string::npos) << r.err;
  // A CUDA program then runs without MPS, as CUDA does when the connection fails.
  auto a = SimProcess::start(state_.path(), {"--alloc", "0:1GiB"});
  ASSERT_TRUE(a);
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(state_.path()), NVML_SUCCESS);
  EXPECT_EQ(rows_of(nvml, "nvmlDeviceGetComputeRunningProcesses", sizeof(nvmlProcessInfo_v1_t)),
            (Rows{{a->pid(), 1 * GiB}}));
}

}  // namespace
}  // namespace gpusim::test
