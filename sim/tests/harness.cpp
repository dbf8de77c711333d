#include "harness.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <climits>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/file_io.hpp"
#include "reachable_copies.hpp"

namespace gpusim::test {

using namespace std::chrono_literals;

std::string driver_path(const std::string& gen) {
  return std::string(GPUSIM_DRIVER_DIR) + "/" + gen + "/libnvidia-ml.so.1";
}

std::string reachable_by_other_users(const std::string& path) {
  static const gpureap::test::ReachableCopies build = [] {
    gpureap::test::ReachableCopies copies{GPUREAP_BUILD_DIR, GPUREAP_TEST_COPIES_DIR,
                                          {GPUSIM_SMI_BINARY, GPUSIM_CUDA_BINARY, GPUSIM_LIBCUDA_PATH}};
    for (const auto& gen : all_generations()) copies.files.push_back(driver_path(gen));
    return copies;
  }();
  return gpureap::test::reachable_by_other_users(build, path);
}

namespace {
// The NVML library gpusim-cuda would load: the environment's choice, else this build's r550.
std::string nvml_library_for_children() {
  const char* chosen = std::getenv("GPUSIM_NVML_LIBRARY");
  return chosen != nullptr && *chosen != '\0' ? chosen : driver_path("r550");
}
}  // namespace

TempDir::TempDir() {
  std::string tmpl = "/tmp/gpusim-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() { (void)remove_tree(path_); }

namespace {

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

int decode_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

// Child side of a spawn: stdout/stderr onto the given descriptors, then exec.
[[noreturn]] void exec_child(const std::vector<std::string>& argv, int out_fd, int err_fd, int in_fd = -1) {
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  int devnull = in_fd >= 0 ? in_fd : ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  auto args = c_argv(argv);
  ::execv(args[0], args.data());
  std::_Exit(127);
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, const std::optional<std::string>& input) {
  CommandResult r;
  int out[2], err[2], in[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return r;
  if (input && ::pipe2(in, O_CLOEXEC) != 0) return r;
  pid_t pid = ::fork();
  if (pid == 0) exec_child(argv, out[1], err[1], in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (input) {
    ::close(in[0]);
    // Commands are short: they fit in the pipe before the child reads them.
    [[maybe_unused]] ssize_t n = ::write(in[1], input->data(), input->size());
    ::close(in[1]);
  }
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds, 2, 10000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  if (open_fds > 0) ::kill(pid, SIGKILL);  // silent for 10 s: hung, do not hang the test too
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.exit_status = decode_status(st);
  return r;
}

CommandResult ctl(const std::string& state, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {GPUSIM_CTL_BINARY, "--state", state};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

bool process_running(pid_t pid) {
  ReadResult r = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!r.ok()) return false;
  auto paren = r.data.rfind(')');
  if (paren == std::string::npos || paren + 2 >= r.data.size()) return false;
  char state = r.data[paren + 2];
  return state != 'Z' && state != 'X';
}

void kill_and_wait(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t r = ::waitpid(pid, nullptr, WNOHANG);
    if (r == pid) return;
    if (r < 0 && errno == ECHILD && !process_running(pid)) return;
    std::this_thread::sleep_for(2ms);
  }
}

std::set<std::string> open_files(unsigned pid) {
  std::set<std::string> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  auto fds = list_dir(dir);
  if (!fds.ok()) return out;
  for (const auto& fd : *fds) {
    char buf[PATH_MAX];
    ssize_t n = ::readlink((dir + "/" + fd).c_str(), buf, sizeof buf - 1);
    if (n > 0) out.insert(std::string(buf, static_cast<std::size_t>(n)));
  }
  return out;
}

std::string memory_maps(unsigned pid) { return read_file("/proc/" + std::to_string(pid) + "/maps").data; }

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

std::unique_ptr<SimProcess> SimProcess::start(const std::string& state, const std::vector<std::string>& args,
                                              std::string* error, int* exit_status,
                                              const std::vector<std::string>& wrapper) {
  std::unique_ptr<SimProcess> p(new SimProcess());
  std::vector<std::string> argv = wrapper;
  if (wrapper.empty()) {
    argv.push_back(GPUSIM_CUDA_BINARY);
  } else {
    // A wrapper runs it as another user, to whom the build tree may be closed: the program and
    // the libraries it loads from their reachable copies.
    argv.insert(argv.end(), {"/usr/bin/env", "GPUSIM_LIBCUDA_LIBRARY=" + reachable_by_other_users(GPUSIM_LIBCUDA_PATH),
                             "GPUSIM_NVML_LIBRARY=" + reachable_by_other_users(nvml_library_for_children()),
                             reachable_by_other_users(GPUSIM_CUDA_BINARY)});
  }
  argv.insert(argv.end(), {"--state", state});
  argv.insert(argv.end(), args.begin(), args.end());
  return launch(std::move(p), argv, error, exit_status);
}

std::unique_ptr<SimProcess> SimProcess::start_drm_client(const std::string& state, const std::vector<std::string>& args,
                                                         std::string* error, const std::vector<std::string>& wrapper) {
  std::vector<std::string> argv = wrapper;
  argv.insert(argv.end(), {GPUSIM_DRM_CLIENT_BINARY, "--state", state});
  argv.insert(argv.end(), args.begin(), args.end());
  return launch(std::unique_ptr<SimProcess>(new SimProcess()), argv, error, nullptr);
}

std::unique_ptr<SimProcess> SimProcess::launch(std::unique_ptr<SimProcess> p, const std::vector<std::string>& argv,
                                               std::string* error, int* exit_status) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return nullptr;
  p->launcher_ = ::fork();
  if (p->launcher_ == 0) exec_child(argv, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  p->out_fd_ = out[0];

  std::string line;
  bool ready = false;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!ready && std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{p->out_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    char c;
    ssize_t n = ::read(p->out_fd_, &c, 1);
    if (n <= 0) break;  // exited before READY
    if (c == '\n') {
      ready = line.rfind("READY ", 0) == 0;
      if (!ready) line.clear();
    } else {
      line.push_back(c);
    }
  }
  if (!ready) {
    // Collect what it said, then make sure it is gone.
    std::string err_text;
    if (auto st = p->wait_exit(3s)) {
      if (exit_status) *exit_status = *st;
      char buf[4096];
      ssize_t n;
      while ((n = ::read(err[0], buf, sizeof buf)) > 0) err_text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(err[0]);
    if (error) {
      *error = argv[0] + " did not become ready (exit " +
               (p->launcher_status_ ? std::to_string(*p->launcher_status_) : std::string("?")) + "): " + err_text;
    }
    return nullptr;
  }
  ::close(err[0]);
  std::istringstream in(line.substr(6));
  std::string field;
  while (in >> field) {
    auto eq = field.find('=');
    std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "pid") p->host_pid_ = static_cast<unsigned>(std::stoul(value));
    if (key == "nspid") p->ns_pid_ = static_cast<unsigned>(std::stoul(value));
    if (key == "client") p->client_id_ = std::stoull(value);
    if (key == "fd") p->fd_ = std::stoi(value);
    if (key == "workers") {
      std::stringstream ws(value);
      std::string w;
      while (std::getline(ws, w, ',')) {
        if (!w.empty()) p->workers_.push_back(static_cast<unsigned>(std::stoul(w)));
      }
    }
  }
  return p;
}

std::optional<int> SimProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (launcher_status_) return launcher_status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(launcher_, &st, WNOHANG);
    if (r == launcher_) {
      launcher_status_ = decode_status(st);
      return launcher_status_;
    }
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(2ms);
  }
}

void SimProcess::signal_owner(int sig) {
  if (host_pid_ <= 1) return;  // never init, whatever a READY line said
  ::kill(static_cast<pid_t>(host_pid_), sig);
  if (sig != SIGKILL) return;
  if (static_cast<pid_t>(host_pid_) == launcher_) {
    wait_exit(5s);
  } else {
    // --pidns: the inner owner dies, then the outer launcher follows it.
    wait_exit(5s);
    eventually([&] { return !process_running(static_cast<pid_t>(host_pid_)); }, 5s);
  }
}

void SimProcess::kill_workers() {
  for (unsigned w : workers_) {
    if (w > 1 && static_cast<pid_t>(w) != ::getpid()) kill_and_wait(static_cast<pid_t>(w));
  }
}

SimProcess::~SimProcess() {
  if (host_pid_ > 1) ::kill(static_cast<pid_t>(host_pid_), SIGKILL);
  if (launcher_ > 0 && !launcher_status_) {
    ::kill(launcher_, SIGKILL);
    wait_exit(5s);
  }
  kill_workers();
  // Orphans re-parented to us (we are a subreaper): reap whatever has died.
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

Nvml::Nvml(const std::string& gen) {
  handle_ = ::dlopen(driver_path(gen).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) error_ = ::dlerror();
}

Nvml::~Nvml() {
  if (handle_ == nullptr) return;
  if (auto* shutdown_fn = fn<InitFn>("nvmlShutdown")) {
    while (shutdown_fn() == NVML_SUCCESS) {
    }
  }
  ::dlclose(handle_);
}

void* Nvml::raw(const char* symbol) const {
  if (handle_ == nullptr) return nullptr;
  return ::dlsym(handle_, symbol);
}

bool Nvml::has(const char* symbol) const { return raw(symbol) != nullptr; }

nvmlReturn_t Nvml::init(const std::string& state) {
  ::setenv("GPUSIM_STATE_DIR", state.c_str(), 1);
  auto* f = fn<InitFn>("nvmlInit_v2");
  EXPECT_NE(f, nullptr) << "nvmlInit_v2 missing";
  return f ? f() : NVML_ERROR_FUNCTION_NOT_FOUND;
}

nvmlReturn_t Nvml::shutdown() {
  auto* f = fn<InitFn>("nvmlShutdown");
  return f ? f() : NVML_ERROR_FUNCTION_NOT_FOUND;
}

nvmlDevice_t Nvml::device(unsigned index) {
  nvmlDevice_t dev = nullptr;
  auto* f = fn<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  EXPECT_NE(f, nullptr);
  if (f) {
    EXPECT_EQ(f(index, &dev), NVML_SUCCESS) << "GetHandleByIndex_v2(" << index << ")";
  }
  return dev;
}

nvmlReturn_t Nvml::memory_v2(nvmlDevice_t dev, nvmlMemory_v2_t* out) {
  auto* f = fn<MemoryV2Fn>("nvmlDeviceGetMemoryInfo_v2");
  if (f == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  std::memset(out, 0, sizeof *out);
  out->version = nvmlMemory_v2;
  return f(dev, out);
}

nvmlReturn_t Nvml::memory_v1(nvmlDevice_t dev, nvmlMemory_t* out) {
  auto* f = fn<MemoryFn>("nvmlDeviceGetMemoryInfo");
  if (f == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return f(dev, out);
}

nvmlReturn_t Nvml::processes(const char* symbol, nvmlDevice_t dev, std::size_t stride,
                             std::vector<nvmlProcessDetail_v1_t>* out) {
  out->clear();
  auto* f = fn<ProcessListFn>(symbol);
  if (f == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  for (int attempt = 0; attempt < 5; ++attempt) {
    unsigned count = 0;
    nvmlReturn_t rc = f(dev, &count, nullptr);
    if (rc == NVML_SUCCESS) return rc;
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) return rc;
    unsigned capacity = count * 2 + 5;
    std::vector<unsigned char> buf(capacity * stride, 0xAA);
    count = capacity;
    rc = f(dev, &count, buf.data());
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) continue;
    if (rc != NVML_SUCCESS) return rc;
    for (unsigned i = 0; i < count; ++i) {
      nvmlProcessDetail_v1_t rec;
      std::memset(&rec, 0, sizeof rec);
      std::memcpy(&rec, buf.data() + i * stride, std::min(stride, sizeof rec));
      out->push_back(rec);
    }
    return rc;
  }
  return NVML_ERROR_INSUFFICIENT_SIZE;
}

}  // namespace gpusim::test
