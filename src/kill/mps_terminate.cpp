#include "kill/mps_terminate.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "proc/proc_io.hpp"
#include "spawn/timed_command.hpp"

namespace gpureap {
namespace {

constexpr std::string_view kPipeVariable = "CUDA_MPS_PIPE_DIRECTORY=";
constexpr const char* kDefaultPipeDirectory = "/tmp/nvidia-mps";

// The daemon's pipe directory: CUDA_MPS_PIPE_DIRECTORY in its environment, else NVIDIA's default.
std::optional<std::string> pipe_directory(const std::string& proc_root, pid_t daemon, std::string& why) {
  auto environ_text = procfs::read_bounded_file(fmt::format("{}/{}/environ", proc_root, daemon), 1 << 20,
                                        "environment of the MPS control daemon", why);
  if (!environ_text) return std::nullopt;
  std::string dir = kDefaultPipeDirectory;
  std::size_t start = 0;
  while (start < environ_text->size()) {
    std::size_t end = environ_text->find('\0', start);
    if (end == std::string::npos) end = environ_text->size();
    const std::string_view entry(environ_text->data() + start, end - start);
    if (entry.substr(0, kPipeVariable.size()) == kPipeVariable && entry.size() > kPipeVariable.size()) {
      dir = std::string(entry.substr(kPipeVariable.size()));
    }
    start = end + 1;
  }
  return dir;
}

// One command through the daemon's front-end; its answer (stdout and stderr).
TimedRun control_command(const std::string& program, const std::string& pipe_dir, const std::string& line,
                         std::chrono::milliseconds timeout) {
  TimedCommand command;
  command.argv = {program};
  command.timeout = timeout;
  command.give_input = true;
  command.input = line + "\n";
  command.extra_env = {"CUDA_MPS_PIPE_DIRECTORY=" + pipe_dir};
  command.max_output_bytes = 16 * 1024;
  return run_timed_command(command);
}

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "…";
  return line;  // the renderer sanitises what it shows
}

}  // namespace

std::optional<MpsControl> find_mps_control(pid_t daemon, const std::string& proc_root, std::string& why) {
  const auto pipe_dir = pipe_directory(proc_root, daemon, why);
  if (!pipe_dir) {
    why = fmt::format("cannot find the pipe directory of MPS control daemon {}: {}", daemon, why);
    return std::nullopt;
  }
  // The pid file proves that the directory is this daemon's, not one a user set up to be asked.
  std::string pid_why;
  const auto pid_text =
      procfs::read_bounded_file(*pipe_dir + "/nvidia-cuda-mps-control.pid", 64, "MPS pid file", pid_why);
  if (!pid_text || std::atoi(pid_text->c_str()) != daemon) {
    why = fmt::format("{}/nvidia-cuda-mps-control.pid does not name MPS control daemon {}{}", *pipe_dir, daemon,
                      pid_text ? "" : ": " + pid_why);
    return std::nullopt;
  }
  char exe_buf[4096];
  const ssize_t n = ::readlink(fmt::format("{}/{}/exe", proc_root, daemon).c_str(), exe_buf, sizeof exe_buf - 1);
  if (n <= 0) {
    why = fmt::format("cannot read the executable of MPS control daemon {}", daemon);
    return std::nullopt;
  }
  const std::string program(exe_buf, static_cast<std::size_t>(n));
  // It runs as root here: only a program that root's own files are.
  procfs::unique_fd exe(::open(program.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  const std::string untrusted = exe ? procfs::untrusted_file_reason(exe.get(), program) : "cannot be opened";
  if (!untrusted.empty()) {
    why = fmt::format("not run as root: {} {}", program, untrusted);
    return std::nullopt;
  }
  return MpsControl{daemon, program, *pipe_dir};
}

std::optional<std::string> mps_command(const MpsControl& control, const std::string& line,
                                       std::chrono::milliseconds timeout, std::string& why) {
  const TimedRun run = control_command(control.program, control.pipe_dir, line, timeout);
  if (!run.ok()) {
    why = fmt::format("{} through MPS control daemon {}: {}", line, control.daemon, describe_timed_run(run, timeout));
    return std::nullopt;
  }
  return run.output;
}

MpsTerminateResult terminate_mps_client(pid_t daemon, pid_t server, pid_t client, const std::string& proc_root,
                                        std::chrono::milliseconds timeout) {
  MpsTerminateResult result;
  std::string why;
  const auto control = find_mps_control(daemon, proc_root, why);
  if (!control) {
    result.detail = why;
    return result;
  }
  const auto answer = mps_command(*control, fmt::format("terminate_client {} {}", server, client), timeout, why);
  if (!answer || !first_line(*answer).empty()) {
    result.detail = answer ? fmt::format("terminate_client {} {} through MPS control daemon {} failed: {}", server,
                                         client, daemon, first_line(*answer))
                           : why;
    return result;
  }
  // The server lets the client go once its work is ended; the ladder comes after that.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string me = std::to_string(client);
  for (;;) {
    const std::string list = mps_command(*control, fmt::format("get_client_list {}", server), timeout, why).value_or("");
    bool listed = false;
    std::size_t start = 0;
    while (start < list.size()) {
      std::size_t end = list.find('\n', start);
      if (end == std::string::npos) end = list.size();
      listed = listed || list.compare(start, end - start, me) == 0;
      start = end + 1;
    }
    if (!listed) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      result.detail = fmt::format("terminate_client {} {} sent, but the server still lists the client after {} ms",
                                  server, client, timeout.count());
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.ok = true;
  result.detail = fmt::format("its MPS work was ended through terminate_client {} {} (control daemon {})", server,
                              client, daemon);
  return result;
}

}  // namespace gpureap
