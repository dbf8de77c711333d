#include "sim_harness.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "reachable_copies.hpp"

extern char** environ;

namespace gpureap::test {
namespace {

std::vector<std::string> build_env(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos && extra.count(entry.substr(0, eq))) continue;
    env.push_back(entry);
  }
  for (const auto& [key, value] : extra) env.push_back(key + "=" + value);
  return env;
}

std::vector<char*> c_array(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int wait_with_timeout(pid_t pid, int timeout_ms, bool* timed_out) {
  int status = 0;
  const bool done = eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout_ms);
  if (!done) {
    *timed_out = true;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  return status;
}

std::string library_for(const std::string& generation) {
  return std::string(GPUSIM_DRIVER_DIR) + "/" + generation + "/libnvidia-ml.so.1";
}

}  // namespace

std::string gpureap_binary() { return GPUREAP_BINARY; }

std::string reachable_by_other_users(const std::string& path) {
  static const ReachableCopies build = [] {
    ReachableCopies copies{GPUREAP_BUILD_DIR, GPUREAP_TEST_COPIES_DIR,
                           {GPUREAP_BINARY, GPUREAP_HTTP_MODULE, GPUSIM_CTL_BINARY, GPUSIM_CUDA_BINARY, GPUSIM_DRM_CLIENT_BINARY,
                            GPUSIM_LIBCUDA_LIBRARY, std::string(GPUSIM_BIN_DIR) + "/nvidia-smi", IPC_LEAVER_BINARY,
                            SIGNAL_RECORDER_BINARY, SLOW_FDATASYNC_LIBRARY, FAKE_MPS_PARENT_BINARY}};
    std::error_code error;
    for (const auto& generation : std::filesystem::directory_iterator(GPUSIM_DRIVER_DIR, error)) {
      copies.files.push_back((generation.path() / "libnvidia-ml.so.1").string());
    }
    return copies;
  }();
  return gpureap::test::reachable_by_other_users(build, path);
}

std::map<std::string, std::string> env_for_other_users(std::map<std::string, std::string> env) {
  for (auto& [name, value] : env) value = reachable_by_other_users(value);
  env.emplace("GPUSIM_LIBCUDA_LIBRARY", reachable_by_other_users(GPUSIM_LIBCUDA_LIBRARY));
  return env;
}

std::string read_text_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

bool running_as_root() { return geteuid() == 0; }

const passwd* test_user() {
  const int lock = open("/run/lock/gpureap-test-user.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) {
    if (lock >= 0) close(lock);
    return nullptr;
  }
  if (getpwnam(kTestUserName) == nullptr) {
    const auto r = run_command({"/usr/sbin/useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                                kTestUserName});
    if (r.exit_code != 0) ADD_FAILURE() << "useradd " << kTestUserName << ": exit " << r.exit_code << ": " << r.err;
  }
  close(lock);
  return getpwnam(kTestUserName);
}

bool can_unshare_pid() {
  return run_command({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "/bin/true"}).exit_code == 0;
}

CommandResult run_command(const std::vector<std::string>& argv, const SpawnOptions& options, int timeout_ms) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  const PreparedExec exec(argv, options);
  // No controlling terminal (a new session): a command that asks for confirmation must not find
  // the terminal of whoever runs the tests (it would wait there, or be stopped by SIGTTIN).
  const pid_t pid = exec.spawn({out_pipe[1], err_pipe[1], true, !options.stdin_path.empty()});
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw std::runtime_error(std::string("clone: ") + std::strerror(errno));
  }
  CommandResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buffer[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    if (poll(fds, 2, static_cast<int>(left)) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      (i == 0 ? result.out : result.err).append(buffer, static_cast<std::size_t>(n));
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  bool timed_out = false;
  const int status = wait_with_timeout(pid, std::max<int>(100, static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count())), &timed_out);
  result.exit_code = (!timed_out && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  return result;
}

SimProcess::SimProcess(SimProcess&& other) noexcept { *this = std::move(other); }

SimProcess& SimProcess::operator=(SimProcess&& other) noexcept {
  if (this != &other) {
    kill_all();
    pid = other.pid;
    launcher_pid = other.launcher_pid;
    ns_pid = other.ns_pid;
    workers = std::move(other.workers);
    ready_line = std::move(other.ready_line);
    pgid_ = other.pgid_;
    reaped_ = other.reaped_;
    other.pgid_ = -1;
    other.launcher_pid = -1;
    other.pid = -1;  // the moved-from object's destructor must not kill what it handed over
    other.workers.clear();
    other.reaped_ = true;
  }
  return *this;
}

SimProcess::~SimProcess() { kill_all(); }

int SimProcess::wait_exit(int timeout_ms) {
  if (reaped_ || launcher_pid <= 0) return -1;
  int status = 0;
  if (!eventually([&] { return waitpid(launcher_pid, &status, WNOHANG) == launcher_pid; }, timeout_ms)) return -1;
  reaped_ = true;
  return status;
}

void SimProcess::kill_all() {
  if (pgid_ > 0) kill(-pgid_, SIGKILL);
  for (pid_t w : workers) kill(w, SIGKILL);
  if (pid > 0) kill(pid, SIGKILL);
  if (!reaped_ && launcher_pid > 0) {
    kill(launcher_pid, SIGKILL);
    waitpid(launcher_pid, nullptr, 0);
  }
  reaped_ = true;
  pgid_ = -1;
}

SimHost::SimHost(const std::vector<std::string>& init_args, std::string generation)
    : generation_(std::move(generation)) {
  char templ[] = "/tmp/gpureap-test-XXXXXX";
  if (mkdtemp(templ) == nullptr) throw std::runtime_error("mkdtemp");
  state_dir_ = templ;
  std::vector<std::string> args = {"init"};
  args.insert(args.end(), init_args.begin(), init_args.end());
  ctl(args);
  // Simulated programs may run as another user in some tests.
  run_command({"/bin/chmod", "-R", "a+rwX", state_dir_});
  if (::mkdir(config_dir().c_str(), 0755) != 0 || ::chmod(config_dir().c_str(), 0755) != 0) {
    throw std::runtime_error("mkdir " + config_dir());
  }
}

SimHost::~SimHost() {
  if (drm_driver_pid_ > 0) {
    kill(drm_driver_pid_, SIGTERM);
    waitpid(drm_driver_pid_, nullptr, 0);
  }
  run_command({"/bin/rm", "-rf", state_dir_});
}

void SimHost::add_drm_gpu(const DrmGpuSpec& spec) {
  std::vector<std::string> args = {"drm-add",        "--pci",           spec.pci,
                                   "--driver",       spec.driver,       "--vram",
                                   std::to_string(spec.vram_total),     "--driver-vram",
                                   std::to_string(spec.driver_vram),    "--card",
                                   std::to_string(spec.card),           "--render",
                                   std::to_string(spec.render),         "--fdinfo",
                                   spec.fdinfo,      "--release-delay-ms", std::to_string(spec.release_delay_ms)};
  if (spec.kfd) args.push_back("--kfd");
  if (!spec.xgmi_hive.empty()) args.insert(args.end(), {"--xgmi-hive", spec.xgmi_hive});
  ctl(args);
  if (drm_driver_pid_ > 0) return;
  const PreparedExec exec({GPUSIM_CTL_BINARY, "drm-driver", "--state", state_dir_}, SpawnOptions{});
  drm_driver_pid_ = exec.spawn({});
  ASSERT_GT(drm_driver_pid_, 0) << "clone: " << std::strerror(errno);
  drm_settle();
}

void SimHost::drm_settle() const {
  const std::string path = state_dir_ + "/drm/cycle";
  const auto cycle = [&path] {
    const std::string text = read_text_file(path);
    return text.empty() ? 0ull : std::stoull(text);
  };
  const unsigned long long wanted = cycle() + 2;
  if (!eventually([&] { return cycle() >= wanted; }, 10000)) {
    ADD_FAILURE() << "the simulated DRM driver did not complete two cycles in 10 s (" << path << ")";
  }
}

SimProcess SimHost::start_drm_client(const std::vector<std::string>& args, std::optional<uid_t> uid) const {
  SimProcess process = start_program(GPUSIM_DRM_CLIENT_BINARY, args, uid);
  drm_settle();
  return process;
}

std::string ready_field(const SimProcess& process, const std::string& key) {
  const std::string& line = process.ready_line;
  const auto at = line.find(" " + key + "=");
  if (at == std::string::npos) return {};
  const auto start = at + key.size() + 2;
  return line.substr(start, line.find(' ', start) - start);
}

std::string SimHost::library_path() const { return library_for(generation_); }

std::map<std::string, std::string> SimHost::env() const {
  std::map<std::string, std::string> env = {{"GPUSIM_STATE_DIR", state_dir_},
                                            {"GPUREAP_DEV_DIR", dev_dir()},
                                            // no DRM GPU unless a test adds or lays one out
                                            {"GPUREAP_SYS_DIR", state_dir_ + "/sys"},
                                            // what the simulated DRM driver writes (its
                                            // processes hold plain files, whose real fdinfo
                                            // has no DRM keys)
                                            {"GPUREAP_FDINFO_DIR", state_dir_ + "/fdinfo"},
                                            {"GPUREAP_NVML_LIBRARY", library_path()},
                                            {"NO_COLOR", ""}};
  for (const auto& [name, value] : extra_env_) env[name] = value;
  return env;
}

void SimHost::ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {GPUSIM_CTL_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--state");
  argv.push_back(state_dir_);
  const auto result = run_command(argv);
  ASSERT_EQ(result.exit_code, 0) << "gpusim failed: " << result.err << result.out;
}

SimProcess SimHost::start(const std::vector<std::string>& args, std::optional<uid_t> uid) const {
  return start_program(GPUSIM_CUDA_BINARY, args, uid);
}

std::string SimHost::sim_binary_named(const std::string& name) const {
  const std::string dir = state_dir_ + "/bin";
  const std::string path = dir + "/" + name;
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(GPUSIM_CUDA_BINARY, path, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(dir, std::filesystem::perms(0755));
  std::filesystem::permissions(path, std::filesystem::perms(0755));
  return path;
}

SimProcess SimHost::start_program(const std::string& program, const std::vector<std::string>& args,
                                  std::optional<uid_t> uid) const {
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions options;
  options.env = env();
  options.uid = uid;
  return launch(argv, options);
}

SimProcess SimHost::start_through(const std::vector<std::string>& switcher,
                                  const std::vector<std::string>& args) const {
  std::vector<std::string> argv = switcher;
  argv.push_back(reachable_by_other_users(GPUSIM_CUDA_BINARY));
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions options;
  options.env = env();
  options.for_other_users = true;
  return launch(argv, options);
}

SimProcess SimHost::launch(const std::vector<std::string>& argv, const SpawnOptions& options) const {
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  const PreparedExec exec(argv, options);
  const pid_t child = exec.spawn({out_pipe[1], -1, false, false});
  close(out_pipe[1]);
  if (child < 0) {
    close(out_pipe[0]);
    throw std::runtime_error(std::string("clone: ") + std::strerror(errno));
  }
  setpgid(child, child);  // both sides, so the group exists before we might signal it
  SimProcess process;
  process.launcher_pid = child;
  process.pgid_ = child;
  process.reaped_ = false;
  std::string line;
  pollfd fd{out_pipe[0], POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    if (poll(&fd, 1, 100) <= 0) continue;
    char buffer[512];
    const ssize_t n = read(out_pipe[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    line.append(buffer, static_cast<std::size_t>(n));
  }
  // Keep the pipe's read end open in a leaked fd? No: the program prints only READY, so
  // closing it is safe; later writes would be a sim bug and would show as SIGPIPE.
  close(out_pipe[0]);
  line = line.substr(0, line.find('\n'));
  process.ready_line = line;
  if (line.rfind("READY", 0) != 0) {
    ADD_FAILURE() << "gpusim-cuda did not become ready: '" << line << "'";
    return process;
  }
  auto field = [&line](const std::string& key) -> std::string {
    const auto at = line.find(" " + key + "=");
    if (at == std::string::npos) return {};
    const auto start = at + key.size() + 2;
    return line.substr(start, line.find(' ', start) - start);
  };
  process.pid = static_cast<pid_t>(std::stol(field("pid")));
  const auto ns = field("nspid");
  process.ns_pid = ns.empty() ? process.pid : static_cast<pid_t>(std::stol(ns));
  const auto workers = field("workers");
  std::size_t start_at = 0;
  while (start_at < workers.size()) {
    const auto comma = workers.find(',', start_at);
    process.workers.push_back(static_cast<pid_t>(std::stol(workers.substr(start_at, comma - start_at))));
    if (comma == std::string::npos) break;
    start_at = comma + 1;
  }
  return process;
}

CommandResult SimHost::gpureap(const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& extra_env) const {
  std::vector<std::string> argv = {GPUREAP_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions options;
  options.env = env();
  for (const auto& [k, v] : extra_env) options.env[k] = v;
  return run_command(argv, options);
}

nlohmann::json SimHost::gpureap_json(const std::vector<std::string>& argv, int* exit_code,
                                     const std::map<std::string, std::string>& extra_env, std::string* err) const {
  const auto result = gpureap(argv, extra_env);
  if (exit_code != nullptr) *exit_code = result.exit_code;
  if (err != nullptr) *err = result.err;
  try {
    return nlohmann::json::parse(result.out);
  } catch (const std::exception& e) {
    std::string command = "gpureap";
    for (const auto& a : argv) command += " " + a;
    ADD_FAILURE() << command << " gave invalid JSON (" << e.what() << "), exit " << result.exit_code
                  << "\nstdout: " << result.out << "\nstderr: " << result.err;
    return nlohmann::json::object();
  }
}

nlohmann::json SimHost::ps_json(const std::vector<std::string>& args, int* exit_code) const {
  std::vector<std::string> argv = {"ps", "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  return gpureap_json(argv, exit_code);
}

const nlohmann::json* find_process(const nlohmann::json& ps, pid_t pid, int gpu) {
  if (!ps.contains("processes")) return nullptr;
  for (const auto& p : ps["processes"]) {
    if (p["pid"] == pid && (gpu < 0 || p["gpu"] == gpu)) return &p;
  }
  return nullptr;
}

const nlohmann::json* find_holder(const nlohmann::json& ps, pid_t pid) {
  if (!ps.contains("holders")) return nullptr;
  for (const auto& h : ps["holders"]) {
    if (h["pid"] == pid) return &h;
  }
  return nullptr;
}

const nlohmann::json& gpu_entry(const nlohmann::json& ps, unsigned index) {
  static const nlohmann::json kMissing = nlohmann::json::object();
  if (!ps.contains("gpus")) return kMissing;
  for (const auto& g : ps["gpus"]) {
    if (g["index"] == index) return g;
  }
  return kMissing;
}

PreparedExec::PreparedExec(std::vector<std::string> command, const SpawnOptions& options)
    : argv(std::move(command)),
      env(build_env(options.uid || options.for_other_users ? env_for_other_users(options.env) : options.env)),
      new_process_group(options.new_process_group),
      uid(options.uid) {
  if (uid && !argv.empty()) argv[0] = reachable_by_other_users(argv[0]);
  args = c_array(argv);
  envp = c_array(env);
  if (!options.stdin_path.empty()) stdin_fd = open(options.stdin_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (uid) {
    const passwd* pw = getpwuid(*uid);
    gid = pw != nullptr ? pw->pw_gid : static_cast<gid_t>(*uid);
  }
}

PreparedExec::~PreparedExec() {
  if (stdin_fd >= 0) close(stdin_fd);
}

namespace {

// The kernel's struct sigaction (rt_sigaction), which the child uses without the C library.
struct KernelSigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  unsigned long mask;
};

// Everything the child needs, in plain fields read before the clone: the child calls no
// function of ours or of the standard library.
struct SpawnPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  bool new_session, new_process_group, stdin_wanted, switch_user;
  int out, err, stdin_fd;
  uid_t uid;
  gid_t gid;
  sigset_t mask;  // the caller's, restored before exec
};

// The child of spawn(): it runs on its own stack in the caller's memory, so it calls the
// kernel directly (no errno, no locks, no sanitizer's bookkeeping) until execve.
[[noreturn]] __attribute__((no_sanitize("address", "undefined"))) void spawned_child(const SpawnPlan& plan) {
  // A handler is the caller's code in shared memory: caught signals go back to their default.
  for (long sig = 1; sig < 65; ++sig) {
    KernelSigaction old{};
    if (syscall(SYS_rt_sigaction, sig, nullptr, &old, 8) != 0) continue;
    if (old.handler == reinterpret_cast<void*>(SIG_DFL) || old.handler == reinterpret_cast<void*>(SIG_IGN)) continue;
    KernelSigaction default_action{reinterpret_cast<void*>(SIG_DFL), 0, nullptr, 0};
    syscall(SYS_rt_sigaction, sig, &default_action, nullptr, 8);
  }
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &plan.mask, nullptr, 8);
  if (plan.new_session) syscall(SYS_setsid);
  if (plan.out >= 0) syscall(SYS_dup2, plan.out, STDOUT_FILENO);
  if (plan.err >= 0) syscall(SYS_dup2, plan.err, STDERR_FILENO);
  if (plan.new_process_group) syscall(SYS_setpgid, 0, 0);
  if (plan.stdin_wanted && (plan.stdin_fd < 0 || syscall(SYS_dup2, plan.stdin_fd, STDIN_FILENO) < 0)) {
    syscall(SYS_exit_group, 126);
  }
  if (plan.switch_user && (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setgid, plan.gid) != 0 ||
                           syscall(SYS_setuid, plan.uid) != 0)) {
    syscall(SYS_exit_group, 126);
  }
  syscall(SYS_execve, plan.path, plan.argv, plan.envp);
  static const char kFailed[] = "exec failed\n";
  syscall(SYS_write, STDERR_FILENO, kFailed, sizeof kFailed - 1);
  syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

__attribute__((no_sanitize("address", "undefined"))) int spawned_child_entry(void* plan) {
  spawned_child(*static_cast<const SpawnPlan*>(plan));
}

// What the child does for `exec` (the caller's signal mask left for the caller to fill in).
SpawnPlan plan_of(const PreparedExec& exec, const PreparedExec::Streams& streams) {
  SpawnPlan plan{};
  plan.path = exec.args[0];
  plan.argv = exec.args.data();
  plan.envp = exec.envp.data();
  plan.new_session = streams.new_session;
  plan.new_process_group = exec.new_process_group;
  plan.stdin_wanted = streams.stdin_wanted;
  plan.switch_user = exec.uid.has_value();
  plan.out = streams.out;
  plan.err = streams.err;
  plan.stdin_fd = exec.stdin_fd;
  plan.uid = exec.uid.value_or(0);
  plan.gid = exec.gid;
  return plan;
}

}  // namespace

pid_t PreparedExec::spawn(const Streams& streams) const {
  constexpr std::size_t kStackBytes = 64 * 1024;
  void* stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  SpawnPlan plan = plan_of(*this, streams);
  // No signal handler of ours may run in the child before it has reset them.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &plan.mask);
  const pid_t pid = clone(spawned_child_entry, static_cast<char*>(stack) + kStackBytes,
                          CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  pthread_sigmask(SIG_SETMASK, &plan.mask, nullptr);
  munmap(stack, kStackBytes);
  return pid;
}

// After fork(): the same steps as a spawned child's, in this process (its mask kept).
void PreparedExec::exec_in_child(bool stdin_wanted) const {
  SpawnPlan plan = plan_of(*this, Streams{-1, -1, false, stdin_wanted});
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, nullptr, &plan.mask, 8);
  spawned_child(plan);
}

}  // namespace gpureap::test
