#include "oci_container.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <gtest/gtest.h>

namespace gpureap::test {
namespace {

constexpr const char* kRunc = "/usr/sbin/runc";
// Where the host's procfs is mounted in the container, for the simulator (GPUSIM_HOST_PROC).
constexpr const char* kHostProc = "/run/gpusim-host-proc";

// Docker's default capabilities (moby's oci/caps/defaults.go), so that what gpureap may do as
// root inside is what it may do in a `docker run` container.
const std::vector<std::string> kDockerCapabilities = {
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
    "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"};

nlohmann::json bind_mount(const std::string& path, bool read_only, const std::string& destination = "") {
  return {{"destination", destination.empty() ? path : destination},
          {"type", "bind"},
          {"source", path},
          {"options", {"rbind", read_only ? "ro" : "rw"}}};
}

// Removes the bundle without ever leaving its filesystem: runc's mounts live in the container's
// mount namespace, but were one ever to show here, /usr's files must not be what is removed.
// Only what the bundle holds is removed: symbolic links, config.json, the log, empty directories.
void remove_bundle(const std::string& dir, dev_t device) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_dev != device) return;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string path = entry.path().string();
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      remove_bundle(path, device);
    } else if (st.st_dev == device) {
      unlink(path.c_str());
    }
  }
  rmdir(dir.c_str());
}

// The mount points of the cgroup hierarchies (every v1 controller's and the v2 one).
std::vector<std::string> cgroup_hierarchies() {
  std::vector<std::string> roots;
  std::ifstream mounts("/proc/self/mounts");
  std::string device, dir, type, line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    fields >> device >> dir >> type;
    if (type == "cgroup" || type == "cgroup2") roots.push_back(dir);
  }
  return roots;
}

// Cgroup parents that runc made for this process's containers (a test's), shared by them:
// two containers below /kubepods need it until the last one is gone. Ordered, so that a
// parent sorts before its children.
std::set<std::string>& parents_made_here() {
  static std::set<std::string> parents;
  return parents;
}

}  // namespace

std::string random_container_id() {
  static std::mt19937_64 generator(std::random_device{}());
  static const char kHex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 64; ++i) id += kHex[generator() % 16];
  return id;
}

bool OciContainer::available() { return running_as_root() && access(kRunc, X_OK) == 0; }

OciContainer::OciContainer(OciSpec spec) : spec_(std::move(spec)) {
  char templ[] = "/tmp/gpureap-oci-XXXXXX";
  if (mkdtemp(templ) == nullptr) throw std::runtime_error("mkdtemp");
  bundle_ = templ;
  write_bundle();
}

void OciContainer::write_bundle() {
  const std::string root = bundle_ + "/rootfs";
  std::filesystem::create_directories(root);
  // Debian's merged /usr: the top-level program and library directories are links into it.
  for (const char* link : {"bin", "lib", "lib64", "sbin"}) {
    std::filesystem::create_symlink(std::string("usr/") + link, root + "/" + link);
  }
  nlohmann::json env = nlohmann::json::array({"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                              std::string("GPUSIM_HOST_PROC=") + kHostProc});
  for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
    if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
  }
  for (const auto& [name, value] : spec_.env) env.push_back(name + "=" + value);

  nlohmann::json namespaces = nlohmann::json::array();
  for (const char* type : {"pid", "network", "ipc", "uts", "mount"}) {
    if (std::string(type) == "pid" && spec_.host_pid_namespace) continue;
    namespaces.push_back({{"type", type}});
  }
  nlohmann::json mounts = nlohmann::json::array({
      {{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
      {{"destination", "/dev"}, {"type", "tmpfs"}, {"source", "tmpfs"},
       {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}},
      {{"destination", "/dev/pts"}, {"type", "devpts"}, {"source", "devpts"},
       {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}},
      {{"destination", "/dev/shm"}, {"type", "tmpfs"}, {"source", "shm"},
       {"options", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}}},
      {{"destination", "/sys"}, {"type", "sysfs"}, {"source", "sysfs"}, {"options", {"nosuid", "noexec", "nodev", "ro"}}},
      {{"destination", "/sys/fs/cgroup"}, {"type", "cgroup"}, {"source", "cgroup"},
       {"options", {"nosuid", "noexec", "nodev", "relatime", "ro"}}},
      bind_mount("/usr", true),
      bind_mount("/etc", true),
      bind_mount("/tmp", false),  // the simulator's state and device files (SimHost) are there
      bind_mount(GPUREAP_BUILD_DIR, true),
      {{"destination", kHostProc}, {"type", "bind"}, {"source", "/proc"}, {"options", {"bind", "ro"}}},
  });
  nlohmann::json devices = nlohmann::json::array({{{"allow", false}, {"access", "rwm"}}});
  std::error_code error;
  if (!spec_.gpu_device_dir.empty()) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(spec_.gpu_device_dir, error)) {
      struct stat st {};
      if (stat(entry.path().c_str(), &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) continue;
      devices.push_back({{"allow", true},
                         {"type", S_ISCHR(st.st_mode) ? "c" : "b"},
                         {"major", major(st.st_rdev)},
                         {"minor", minor(st.st_rdev)},
                         {"access", "rw"}});
    }
  }
  nlohmann::json linux_section = {
      {"namespaces", namespaces},
      {"resources", {{"devices", devices}}},
      {"maskedPaths", {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"}},
      {"readonlyPaths", {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}},
  };
  if (!spec_.cgroups_path.empty()) linux_section["cgroupsPath"] = spec_.cgroups_path;
  const nlohmann::json caps(kDockerCapabilities);
  const nlohmann::json config = {
      {"ociVersion", "1.0.2-dev"},
      {"process",
       {{"terminal", false},
        {"user", {{"uid", 0}, {"gid", 0}}},
        {"args", spec_.args},
        {"env", env},
        {"cwd", "/"},
        {"capabilities", {{"bounding", caps}, {"effective", caps}, {"permitted", caps}}},
        {"rlimits", {{{"type", "RLIMIT_NOFILE"}, {"hard", 1024}, {"soft", 1024}}}},
        {"noNewPrivileges", true}}},
      {"root", {{"path", "rootfs"}, {"readonly", true}}},
      {"hostname", "gpureap-oci"},
      {"mounts", mounts},
      {"linux", linux_section},
  };
  std::ofstream(bundle_ + "/config.json") << config.dump(2);
}

bool OciContainer::start(std::string* first_line, int timeout_ms) {
  if (!launch()) return false;
  *first_line = next_line(timeout_ms);
  return !first_line->empty();
}

bool OciContainer::launch() {
  // The parents runc is about to make for an absolute cgroupsPath (/kubepods/burstable/pod…)
  // are removed after the containers; those that exist already are someone else's.
  if (spec_.cgroups_path.starts_with("/")) {
    for (const std::string& root : cgroup_hierarchies()) {
      for (std::string path = spec_.cgroups_path; path.rfind('/') > 0;) {
        path.erase(path.rfind('/'));
        if (access((root + path).c_str(), F_OK) != 0) parents_made_here().insert(root + path);
      }
    }
  }
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return false;
  const std::string log_path = bundle_ + "/stderr.log";
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SpawnOptions options;
  options.stdin_path = "/dev/null";
  std::vector<std::string> argv = {kRunc, "run", "--bundle", bundle_};
  if (spec_.detach) argv.push_back("--detach");
  argv.push_back(spec_.id);
  const PreparedExec exec(argv, options);
  const pid_t child = fork();
  if (child == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    if (log_fd >= 0) dup2(log_fd, STDERR_FILENO);
    exec.exec_in_child(true);
  }
  close(out_pipe[1]);
  if (log_fd >= 0) close(log_fd);
  if (child < 0) {
    close(out_pipe[0]);
    return false;
  }
  runc_pid_ = child;
  stdout_fd_ = out_pipe[0];
  return true;
}

void OciContainer::read_output(int timeout_ms, bool until_line) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (stdout_fd_ >= 0 && !(until_line && pending_.find('\n') != std::string::npos)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd fd{stdout_fd_, POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(stdout_fd_, buffer, sizeof buffer);
    if (n <= 0) {
      close(stdout_fd_);
      stdout_fd_ = -1;
      return;
    }
    pending_.append(buffer, static_cast<std::size_t>(n));
  }
}

std::string OciContainer::next_line(int timeout_ms) {
  read_output(timeout_ms, true);
  const std::size_t newline = pending_.find('\n');
  if (newline == std::string::npos) return {};
  std::string line = pending_.substr(0, newline);
  pending_.erase(0, newline + 1);
  return line;
}

std::string OciContainer::rest_of_output(int timeout_ms) {
  read_output(timeout_ms, false);
  return std::exchange(pending_, {});
}

int OciContainer::wait_exit(int timeout_ms) {
  if (runc_pid_ <= 0) return exit_status_;
  int status = 0;
  if (!eventually([&] { return waitpid(runc_pid_, &status, WNOHANG) == runc_pid_; }, timeout_ms)) return -1;
  runc_pid_ = -1;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_status_;
}

CommandResult OciContainer::runc(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {kRunc};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, {}, 10000);
}

pid_t OciContainer::init_pid() const {
  const CommandResult state = runc({"state", spec_.id});
  if (state.exit_code != 0) return -1;
  try {
    const auto json = nlohmann::json::parse(state.out);
    const pid_t pid = json.value("pid", 0);
    return json.value("status", "") == "stopped" || pid <= 0 ? -1 : pid;
  } catch (const std::exception&) {
    return -1;
  }
}

std::string OciContainer::log() const { return read_text_file(bundle_ + "/stderr.log"); }

OciContainer::~OciContainer() {
  // --all: with the host's PID namespace the init's death does not end the rest.
  if (runc_pid_ > 0 || spec_.detach) runc({"kill", "--all", spec_.id, "KILL"});
  if (runc_pid_ > 0 && wait_exit(5000) < 0) {
    kill(runc_pid_, SIGKILL);
    waitpid(runc_pid_, nullptr, 0);
    runc_pid_ = -1;
  }
  // `runc run` in the foreground removes its container when it exits by itself.
  if (spec_.detach || exit_status_ < 0) runc({"delete", "--force", spec_.id});
  // Every parent this process made that is empty now, deepest first: one made for another
  // container still running here (or used by another test meanwhile) is not empty and stays,
  // for the last container to remove.
  auto& made = parents_made_here();
  const std::vector<std::string> deepest_first(made.rbegin(), made.rend());
  for (const std::string& parent : deepest_first) {
    if (rmdir(parent.c_str()) == 0) made.erase(parent);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
  struct stat st {};
  if (stat(bundle_.c_str(), &st) == 0) remove_bundle(bundle_, st.st_dev);
}

}  // namespace gpureap::test
