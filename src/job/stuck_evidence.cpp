#include "job/stuck_evidence.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "proc/debugger_commands.hpp"
#include "proc/proc_io.hpp"
#include "proc/spawn_hygiene.hpp"

extern char** environ;

namespace gpureap::job {
namespace {

// Runs argv with stdout and stderr into `output_path`; kills it after `timeout`.
std::string run_tool(const std::vector<std::string>& argv, const std::string& output_path,
                     std::chrono::seconds timeout) {
  const std::string program = find_in_path(argv.front());
  if (program.empty()) return argv.front() + " is not installed";
  procfs::unique_fd out(open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  if (!out) return fmt::format("cannot write {}: {}", output_path, std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.get(), STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  (void)close_inherited_descriptors(actions);  // a debugger holds nothing of gpureap's
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, program.c_str(), &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) return fmt::format("cannot run {}: {}", program, std::strerror(rc));
  // Wait on a pidfd so that the timeout needs no sleep loop.
  procfs::unique_fd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  pollfd p{pidfd.get(), POLLIN, 0};
  const int ready = pidfd ? poll(&p, 1, static_cast<int>(timeout.count() * 1000)) : 1;
  std::string note;
  if (ready == 0) {
    kill(-pid, SIGKILL);  // its own process group: the tool and anything it started
    note = fmt::format("{} did not finish within {} s and was stopped", argv.front(), timeout.count());
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (note.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    note = fmt::format("{} failed (see {})", argv.front(), output_path);
  }
  return note;
}

}  // namespace

std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : std::string();
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    if (!dir.empty() && dir.front() == '/') {  // a relative PATH entry is never searched as root
      std::string candidate = std::string(dir) + "/" + name;
      struct stat st{};
      if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
    }
    if (colon == std::string_view::npos) return {};
    rest.remove_prefix(colon + 1);
  }
}

void dump_process(const DumpSettings& settings, const std::string& exe_basename, bool uses_gpu,
                  ProcessEvidence& evidence) {
  auto dump = [&](const std::vector<std::string>& argv, const char* tool) {
    const std::string file = fmt::format("{}/{}.{}.txt", settings.directory, evidence.pid, tool);
    std::string note = run_tool(argv, file, settings.timeout);
    struct stat st{};
    if (stat(file.c_str(), &st) == 0 && st.st_size > 0) evidence.dump_files.push_back(file);
    if (!note.empty()) evidence.notes.push_back(std::move(note));
  };
  const bool in_d = evidence.state == 'D';
  if (looks_like_python(exe_basename)) {
    if (!find_in_path("py-spy").empty()) {
      dump(py_spy_command(evidence.pid, in_d), "py-spy");
      return;
    }
    evidence.notes.push_back("py-spy is not installed: a Python stack needs `" +
                             command_line(py_spy_command(evidence.pid, in_d)) + "`");
  }
  if (!uses_gpu && !looks_like_python(exe_basename)) return;  // a debugger per helper process costs too much
  if (in_d) {
    evidence.notes.push_back("no gdb backtrace: attaching waits until it leaves the kernel call (see kernel_stack)");
    return;
  }
  if (!find_in_path("gdb").empty()) {
    dump(gdb_command(evidence.pid), "gdb");
  } else {
    evidence.notes.push_back("gdb is not installed: no native stack");
  }
}

}  // namespace gpureap::job
