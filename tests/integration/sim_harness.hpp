// Test harness: a simulated GPU host per test (state dir + device files), real processes of
// the simulated CUDA program, and the real gpureap binary run against them.
#pragma once

#include <pwd.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// Whether this program runs under AddressSanitizer (gcc says so with __SANITIZE_ADDRESS__,
// clang with __has_feature, which gcc 12's preprocessor cannot parse).
#if defined(__SANITIZE_ADDRESS__)
#define GPUREAP_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUREAP_TEST_ASAN 1
#endif
#endif

namespace gpureap::test {

#ifdef GPUREAP_TEST_ASAN
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  std::string out;
  std::string err;
};

struct SpawnOptions {
  std::map<std::string, std::string> env;  // added to the harness environment
  std::optional<uid_t> uid;                // run as this user (needs root)
  bool for_other_users = false;            // the environment reachable by a user the command switches to
  bool new_process_group = true;
  std::string stdin_path;                  // the command's stdin; "" leaves the harness's
};

// Everything exec needs, built before fork(): the tests fork from processes that run threads
// (the export, fleet and watch tests serve HTTP in-process), and a child that allocates after
// fork() can deadlock on an allocator lock another thread held at the fork (seen: Fleet tests
// under ASan killed after 20 s with no output, 2 runs in 24). Build one, fork, and in the child
// use only async-signal-safe calls (open, dup2, setsid) before exec_in_child.
struct PreparedExec {
  PreparedExec(std::vector<std::string> command, const SpawnOptions& options);
  ~PreparedExec();
  PreparedExec(const PreparedExec&) = delete;
  PreparedExec& operator=(const PreparedExec&) = delete;
  // Process group (options.new_process_group), stdin (options.stdin_path), user, execve.
  [[noreturn]] void exec_in_child(bool stdin_wanted) const;

  // What a spawned child's standard streams are (-1: the harness's own).
  struct Streams {
    int out = -1;
    int err = -1;
    bool new_session = false;   // setsid first: no controlling terminal
    bool stdin_wanted = false;  // options.stdin_path as its stdin
  };
  // Starts the program as fork() and exec_in_child do, in a child that shares this process's
  // memory until it execs (clone with CLONE_VM | CLONE_VFORK, as posix_spawn does): a fork of a
  // sanitized test program copies its page tables and makes it fault on every page it writes
  // afterwards, ~45 ms of CPU a fork with ~30 MB in use against ~1 ms. The child's PID, or -1.
  pid_t spawn(const Streams& streams) const;

  std::vector<std::string> argv, env;
  std::vector<char*> args, envp;
  bool new_process_group = true;
  int stdin_fd = -1;
  std::optional<uid_t> uid;
  gid_t gid = 0;
};

// Runs a program to completion (argv[0] is a path), capturing stdout and stderr.
CommandResult run_command(const std::vector<std::string>& argv, const SpawnOptions& options = {},
                          int timeout_ms = 30000);

// A running gpusim-cuda; killed (whole process group) and reaped on destruction.
class SimProcess {
 public:
  SimProcess() = default;
  SimProcess(SimProcess&& other) noexcept;
  SimProcess& operator=(SimProcess&& other) noexcept;
  ~SimProcess();

  pid_t pid = -1;          // host pid of the owner (from READY)
  pid_t launcher_pid = -1; // the process we forked (differs from pid with --pidns)
  pid_t ns_pid = -1;
  std::vector<pid_t> workers;
  std::string ready_line;

  // Waits for the launcher to exit (after a signal the test sent); returns its wait status.
  int wait_exit(int timeout_ms = 10000);
  void kill_all();

 private:
  friend class SimHost;
  pid_t pgid_ = -1;
  bool reaped_ = true;
};

// A simulated AMD or Intel GPU: what `gpusim drm-add` is given (docs/simulator.md, "AMD and
// Intel GPUs").
struct DrmGpuSpec {
  std::string pci;
  std::string driver = "amdgpu";                 // amdgpu, i915, xe
  std::uint64_t vram_total = 16ull << 30;
  std::uint64_t driver_vram = 128ull << 20;      // VRAM the driver itself keeps
  int card = 1;
  int render = 128;
  std::string fdinfo = "current";                // amdgpu: current (5.19+) or legacy (5.14-5.18)
  bool kfd = false;
  std::string xgmi_hive;                         // hex hive id, "" for none
  unsigned release_delay_ms = 0;
};

class SimHost {
 public:
  // `gpusim init` with these arguments in a fresh state dir.
  explicit SimHost(const std::vector<std::string>& init_args = {"--gpus", "2"},
                   std::string generation = "r550");
  ~SimHost();
  SimHost(const SimHost&) = delete;
  SimHost& operator=(const SimHost&) = delete;

  const std::string& state_dir() const { return state_dir_; }
  // Where tests put the files that define what root does (a policy, a configuration, a
  // web-config): root's own directory, 0755, since gpureap trusts no such file in a directory
  // others may write to, as the state directory is.
  std::string config_dir() const { return state_dir_ + "/etc"; }
  std::string dev_dir() const { return state_dir_ + "/dev"; }
  std::string library_path() const;
  void set_generation(std::string generation) { generation_ = std::move(generation); }
  // An environment variable every later start, gpureap run and ctl gets (an empty value is
  // passed as empty): the MPS tests point CUDA programs at their control daemon with it.
  void set_env(const std::string& name, std::string value) { extra_env_[name] = std::move(value); }

  // Environment under which both gpureap and simulated programs see this host.
  std::map<std::string, std::string> env() const;

  // gpusim <args...> --state <dir>; fails the test when it exits non-zero.
  void ctl(const std::vector<std::string>& args) const;

  // Starts gpusim-cuda <args...> and waits for its READY line.
  SimProcess start(const std::vector<std::string>& args, std::optional<uid_t> uid = std::nullopt) const;
  // The same from another executable (see sim_binary_named).
  SimProcess start_program(const std::string& program, const std::vector<std::string>& args,
                           std::optional<uid_t> uid = std::nullopt) const;
  // gpusim-cuda <args...> started through a command that switches to the test user and runs
  // its last words (runuser -u U --, su ... -c 'exec "$0" "$@"' -- U): the program's path and
  // the environment made reachable by that user; the switcher is the process the test forked.
  SimProcess start_through(const std::vector<std::string>& switcher, const std::vector<std::string>& args) const;
  // A copy of gpusim-cuda at <state>/bin/<name>: a process whose executable is called `name`
  // (what protection by executable path sees), runnable by any user.
  std::string sim_binary_named(const std::string& name) const;

  // A simulated DRM GPU (gpusim drm-add), and on the first call the simulated DRM driver
  // (gpusim drm-driver), which runs until the host is destroyed. Fails the test on error.
  void add_drm_gpu(const DrmGpuSpec& spec);
  // gpusim-drm-client <args...> (--node renderD128 --vram 2GiB --workers 1 ...), as `uid` when
  // given; returns once the driver has settled (drm_settle), so its fdinfo and KFD files exist.
  // Its READY line also has client=<id> and fd=<descriptor> (ready_field).
  SimProcess start_drm_client(const std::vector<std::string>& args, std::optional<uid_t> uid = std::nullopt) const;
  // Waits until the DRM driver has completed two full cycles that started after the call: what
  // it shows then reflects every process change made before the call. Fails the test after 10 s.
  void drm_settle() const;

  // Runs the real gpureap binary with this host's environment (plus extra).
  CommandResult gpureap(const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& extra_env = {}) const;
  // gpureap <argv> (which asks for --json), parsed; fails the test on invalid JSON. The exit
  // status goes to *exit_code and stderr to *err when given.
  nlohmann::json gpureap_json(const std::vector<std::string>& argv, int* exit_code = nullptr,
                              const std::map<std::string, std::string>& extra_env = {},
                              std::string* err = nullptr) const;
  // gpureap ps --json (plus args), parsed; fails the test on invalid JSON.
  nlohmann::json ps_json(const std::vector<std::string>& args = {}, int* exit_code = nullptr) const;

 private:
  SimProcess launch(const std::vector<std::string>& argv, const SpawnOptions& options) const;
  std::string state_dir_;
  pid_t drm_driver_pid_ = -1;
  std::string generation_;
  std::map<std::string, std::string> extra_env_;
};

// The value of `key` in a READY line ("READY pid=1 workers=2,3 client=4 fd=3"); "" when absent.
std::string ready_field(const SimProcess& process, const std::string& key);

// Helpers over ps JSON.
const nlohmann::json* find_process(const nlohmann::json& ps, pid_t pid, int gpu = -1);
const nlohmann::json* find_holder(const nlohmann::json& ps, pid_t pid);
const nlohmann::json& gpu_entry(const nlohmann::json& ps, unsigned index);

bool running_as_root();
// The system user gpureap-test-user (needs root), created at most once however many test
// processes ask at the same time: an flock serialises the check and the useradd (two racing
// useradds fail with exit 9). nullptr when it cannot be created.
constexpr const char* kTestUserName = "gpureap-test-user";
const passwd* test_user();
// unshare(1) can make a PID namespace with its own /proc here (root, kernel allows it).
bool can_unshare_pid();
// Polls until predicate() is true or timeout; returns the final value.
template <typename Predicate>
bool eventually(Predicate predicate, int timeout_ms = 5000);

std::string gpureap_binary();
// This build's programs and libraries (gpureap, gpusim-cuda, the simulated drivers, the test
// tools) where a user other than root can exec or load them: the path itself, or a copy when
// the checkout is closed to others, as a clone in /root is (tests/support/reachable_copies.hpp).
// Any other path comes back unchanged. run_command and SimHost::start apply it (and
// env_for_other_users) to what they run with SpawnOptions::uid; a test that switches users
// itself (setpriv, runuser, su) calls both.
std::string reachable_by_other_users(const std::string& path);
// `env` with every value that names one of those files replaced the same way, and the
// simulator's libcuda.so.1 named (GPUSIM_LIBCUDA_LIBRARY) for gpusim-cuda.
std::map<std::string, std::string> env_for_other_users(std::map<std::string, std::string> env);
// The whole file, or "" when it cannot be read.
std::string read_text_file(const std::string& path);
constexpr unsigned long long GiB = 1ull << 30;
constexpr unsigned long long MiB = 1ull << 20;

}  // namespace gpureap::test

#include "sim_harness_inl.hpp"
