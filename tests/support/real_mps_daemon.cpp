#include "real_mps_daemon.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace gpureap::test {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

template <typename Pred>
bool within(std::chrono::milliseconds limit, Pred pred) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Runs `program` with `args` as uid:gid, the daemon's directories in its environment and
// `input` on stdin; what it wrote to stdout and stderr (nothing is kept for `-d`, whose daemon
// would hold the pipe). Waits at most 10 s.
std::string run_as(const std::string& program, const std::vector<std::string>& args, uid_t uid, gid_t gid,
                   const std::string& pipe, const std::string& log, const std::string& input) {
  const bool daemon = !args.empty() && args.front() == "-d";
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return {};
  if (::pipe2(out, O_CLOEXEC) != 0) return {};
  const std::string pipe_env = "CUDA_MPS_PIPE_DIRECTORY=" + pipe, log_env = "CUDA_MPS_LOG_DIRECTORY=" + log;
  std::vector<char*> argv{const_cast<char*>(program.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {const_cast<char*>(pipe_env.c_str()), const_cast<char*>(log_env.c_str()), path_env, nullptr};
  const pid_t child = ::fork();
  if (child == 0) {
    const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ::dup2(in[0], 0);
    ::dup2(daemon ? null_fd : out[1], 1);
    ::dup2(daemon ? null_fd : out[1], 2);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(126);
    if (::chdir("/") != 0) ::_exit(126);
    ::execve(program.c_str(), argv.data(), envp);
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  (void)!::write(in[1], input.data(), input.size());
  ::close(in[1]);
  std::string text;
  char buffer[4096];
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  if (child > 0) {
    // `-d` returns once its daemon runs; the front end once it has answered.
    if (!within(std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()),
                [&] { return ::waitpid(child, nullptr, WNOHANG) == child; })) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
  }
  return text;
}

// The process running `program` whose environment names `pipe` as its pipe directory.
pid_t find_daemon(const std::string& program, const std::string& pipe) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return -1;
  const std::string wanted = "CUDA_MPS_PIPE_DIRECTORY=" + pipe;
  pid_t found = -1;
  while (dirent* entry = ::readdir(proc)) {
    const pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    const std::string base = "/proc/" + std::string(entry->d_name);
    char exe[4096];
    const ssize_t n = ::readlink((base + "/exe").c_str(), exe, sizeof exe - 1);
    if (n <= 0 || std::string(exe, static_cast<std::size_t>(n)) != program) continue;
    const std::string env = read_all(base + "/environ");
    std::size_t start = 0;
    for (std::size_t end; (end = env.find('\0', start)) != std::string::npos; start = end + 1) {
      if (env.compare(start, end - start, wanted) == 0) found = pid;
    }
    const std::string stat = read_all(base + "/stat");
    const auto close = stat.rfind(')');
    if (found == pid && close != std::string::npos && stat.size() > close + 2 && stat[close + 2] == 'Z') found = -1;
    if (found > 0) break;
  }
  ::closedir(proc);
  return found;
}

}  // namespace

std::string real_mps_package(int major, std::string& why) {
  const char* env = std::getenv("GPUREAP_NVIDIA_MPS_DIR");
  const std::string root = env != nullptr && *env != '\0' ? env : GPUREAP_NVIDIA_MPS_DIR;
  const std::string dir = root + "/" + std::to_string(major);
  if (::access((dir + "/usr/bin/nvidia-cuda-mps-control").c_str(), X_OK) != 0) {
    why = "NVIDIA's nvidia-cuda-mps " + std::to_string(major) + " is not unpacked in " + dir +
          ": run scripts/fetch-nvidia-mps.sh as root (it fetches Debian's package, non-free)";
    return {};
  }
  return dir;
}

RealMpsDaemon::RealMpsDaemon(const std::string& package, const std::string& work_dir, uid_t uid, gid_t gid)
    : package_(package), work_dir_(work_dir), uid_(uid), gid_(gid) {
  for (const std::string& dir : {work_dir_, pipe(), log()}) {
    ::mkdir(dir.c_str(), 0755);
    if (::chown(dir.c_str(), uid, gid) != 0 || ::chmod(dir.c_str(), 0755) != 0) {
      error_ = dir + ": " + std::strerror(errno);
      return;
    }
  }
  const std::string said = run_as(control_program(), {"-d"}, uid_, gid_, pipe(), log(), "");
  if (!within(std::chrono::seconds(5), [&] { return exists(pipe() + "/control"); })) {
    error_ = "no control socket in " + pipe() + " after 5 s: " + said + read_all(log() + "/control.log");
    return;
  }
  within(std::chrono::seconds(5), [&] { return (pid_ = find_daemon(control_program(), pipe())) > 0; });
  if (pid_ <= 0) error_ = "the daemon made its socket but no process of " + control_program() + " names " + pipe();
}

RealMpsDaemon::~RealMpsDaemon() {
  if (!running()) return;
  if (!quit()) {
    ::kill(pid_, SIGKILL);
    within(std::chrono::seconds(2), [&] { return !running(); });
  }
}

bool RealMpsDaemon::running() const {
  if (pid_ <= 0) return false;
  const std::string stat = read_all("/proc/" + std::to_string(pid_) + "/stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
}

std::string RealMpsDaemon::command(const std::string& line) const {
  return run_as(control_program(), {}, uid_, gid_, pipe(), log(), line + "\n");
}

bool RealMpsDaemon::quit() {
  command("quit");
  return within(std::chrono::seconds(5), [&] { return !running(); });
}

}  // namespace gpureap::test
