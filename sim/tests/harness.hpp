// Test support: temporary state directories, the gpusim programs as real processes, and the
// simulated libnvidia-ml.so.1 loaded with dlopen through the simulator's own ABI header.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim_nvml_abi.hpp"

namespace gpusim::test {

inline const std::vector<std::string>& all_generations() {
  static const std::vector<std::string> gens = {"r450", "r470", "r535_54", "r535_98", "r550", "quirk32"};
  return gens;
}
std::string driver_path(const std::string& gen);
// This build's nvidia-smi or a driver library where a user other than root can reach it: the
// path itself, or a copy when the build tree is closed to others (tests/support/reachable_copies.hpp).
std::string reachable_by_other_users(const std::string& path);

// mkdtemp directory, removed recursively on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_status = -1;  // 128 + signal when killed
  std::string out;
  std::string err;
};
// Runs a program to completion, capturing stdout and stderr; stdin is `input`, else /dev/null.
CommandResult run_command(const std::vector<std::string>& argv, const std::optional<std::string>& input = std::nullopt);
// `gpusim --state <state> args...`
CommandResult ctl(const std::string& state, const std::vector<std::string>& args);

// A running gpusim-cuda. The destructor SIGKILLs everything it started and reaps it.
class SimProcess {
 public:
  // Starts gpusim-cuda --state <state> args... and waits for its READY line. On failure
  // returns null and fills *error (exit status and stderr).
  // `wrapper` runs it (e.g. setpriv ... to run it as another user).
  static std::unique_ptr<SimProcess> start(const std::string& state, const std::vector<std::string>& args,
                                           std::string* error = nullptr, int* exit_status = nullptr,
                                           const std::vector<std::string>& wrapper = {});
  // gpusim-drm-client --state <state> args... (sim/drm/client_main.cpp), the same way; its READY
  // line's client= and fd= are client_id() and fd(). `wrapper` runs it (unshare -pf ...).
  static std::unique_ptr<SimProcess> start_drm_client(const std::string& state, const std::vector<std::string>& args,
                                                      std::string* error = nullptr,
                                                      const std::vector<std::string>& wrapper = {});
  ~SimProcess();

  unsigned long long client_id() const { return client_id_; }
  int fd() const { return fd_; }
  unsigned pid() const { return host_pid_; }           // the owner, as the host sees it
  unsigned nspid() const { return ns_pid_; }
  const std::vector<unsigned>& workers() const { return workers_; }
  pid_t launcher() const { return launcher_; }          // our direct child (== pid() without --pidns)

  // Sends `sig` to the owner; with SIGKILL, returns once the owner is gone.
  void signal_owner(int sig);
  // SIGKILL to every worker, returning once they are gone.
  void kill_workers();
  // Waits for the launcher to exit; returns its exit status (128+sig if killed), or nullopt.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);

 private:
  SimProcess() = default;
  static std::unique_ptr<SimProcess> launch(std::unique_ptr<SimProcess> p, const std::vector<std::string>& argv,
                                            std::string* error, int* exit_status);
  unsigned long long client_id_ = 0;
  int fd_ = -1;
  pid_t launcher_ = -1;
  int out_fd_ = -1;
  unsigned host_pid_ = 0;
  unsigned ns_pid_ = 0;
  std::vector<unsigned> workers_;
  std::optional<int> launcher_status_;
};

// SIGKILL and wait until the process is gone (reaped, or a zombie of someone else).
void kill_and_wait(pid_t pid);
// True while /proc/<pid> exists and is not a zombie.
bool process_running(pid_t pid);

// Link targets of /proc/<pid>/fd (what fuser and lsof see).
std::set<std::string> open_files(unsigned pid);
// The text of /proc/<pid>/maps.
std::string memory_maps(unsigned pid);

// Polls `pred` every 10 ms until it holds or `timeout` passes.
bool eventually(const std::function<bool()>& pred,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(3000));

// The simulated libnvidia-ml.so.1 of one generation, opened with RTLD_LOCAL so that several
// generations can be loaded side by side. Points GPUSIM_STATE_DIR at `state` for nvmlInit.
class Nvml {
 public:
  explicit Nvml(const std::string& gen);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  std::string load_error() const { return error_; }
  bool has(const char* symbol) const;
  template <class Fn>
  Fn* fn(const char* symbol) const {
    return reinterpret_cast<Fn*>(raw(symbol));
  }

  // Convenience wrappers for the calls most tests make; they fail the test if the symbol is
  // missing.
  // Sets GPUSIM_STATE_DIR to `state` and calls nvmlInit_v2.
  nvmlReturn_t init(const std::string& state);
  nvmlReturn_t shutdown();
  nvmlDevice_t device(unsigned index);  // asserts success
  nvmlReturn_t memory_v2(nvmlDevice_t dev, nvmlMemory_v2_t* out);
  nvmlReturn_t memory_v1(nvmlDevice_t dev, nvmlMemory_t* out);
  // Lists processes through `symbol` (two-call protocol) at `stride` bytes per record.
  nvmlReturn_t processes(const char* symbol, nvmlDevice_t dev, std::size_t stride,
                         std::vector<nvmlProcessDetail_v1_t>* out);

 private:
  void* raw(const char* symbol) const;
  void* handle_ = nullptr;
  std::string error_;
};

// Function types of the entry points the tests call.
using InitFn = nvmlReturn_t();
using InitWithFlagsFn = nvmlReturn_t(unsigned);
using CountFn = nvmlReturn_t(unsigned*);
using HandleByIndexFn = nvmlReturn_t(unsigned, nvmlDevice_t*);
using HandleByUuidFn = nvmlReturn_t(const char*, nvmlDevice_t*);
using StringFn = nvmlReturn_t(nvmlDevice_t, char*, unsigned);
using SystemStringFn = nvmlReturn_t(char*, unsigned);
using UintFn = nvmlReturn_t(nvmlDevice_t, unsigned*);
using IntOutFn = nvmlReturn_t(int*);
using ProcessListFn = nvmlReturn_t(nvmlDevice_t, unsigned*, void*);
using DetailListFn = nvmlReturn_t(nvmlDevice_t, nvmlProcessDetailList_v1_t*);
using MemoryFn = nvmlReturn_t(nvmlDevice_t, nvmlMemory_t*);
using MemoryV2Fn = nvmlReturn_t(nvmlDevice_t, nvmlMemory_v2_t*);
using PciV3Fn = nvmlReturn_t(nvmlDevice_t, nvmlPciInfo_t*);
using PciV2Fn = nvmlReturn_t(nvmlDevice_t, nvmlPciInfo_v2_t*);
using UtilizationFn = nvmlReturn_t(nvmlDevice_t, nvmlUtilization_t*);
using TemperatureFn = nvmlReturn_t(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned*);
using EnableStateFn = nvmlReturn_t(nvmlDevice_t, nvmlEnableState_t*);
using ComputeModeFn = nvmlReturn_t(nvmlDevice_t, nvmlComputeMode_t*);
using ProcessUtilFn = nvmlReturn_t(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned*, unsigned long long);
using MigModeFn = nvmlReturn_t(nvmlDevice_t, unsigned*, unsigned*);
using MigHandleFn = nvmlReturn_t(nvmlDevice_t, unsigned, nvmlDevice_t*);
using ParentHandleFn = nvmlReturn_t(nvmlDevice_t, nvmlDevice_t*);
using ErrorStringFn = const char*(nvmlReturn_t);
using ProcessNameFn = nvmlReturn_t(unsigned, char*, unsigned);
using ConfComputeFn = nvmlReturn_t(nvmlDevice_t, nvmlConfComputeMemSizeInfo_t*);
using PstateFn = nvmlReturn_t(nvmlDevice_t, nvmlPstates_t*);
using EnablePairFn = nvmlReturn_t(nvmlDevice_t, nvmlEnableState_t*, nvmlEnableState_t*);
using EccCountFn = nvmlReturn_t(nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t, unsigned long long*);
using VideoUtilFn = nvmlReturn_t(nvmlDevice_t, unsigned*, unsigned*);
using DriverModelFn = nvmlReturn_t(nvmlDevice_t, nvmlDriverModel_t*, nvmlDriverModel_t*);

inline constexpr std::uint64_t GiB = 1ULL << 30;
inline constexpr std::uint64_t MiB = 1ULL << 20;

}  // namespace gpusim::test
