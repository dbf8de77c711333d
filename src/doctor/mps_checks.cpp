// NVIDIA MPS: a server that holds memory with no client, a server that a client's death left
// faulted (its clients' work is lost and it takes no new client until they have all exited),
// and a pipe directory that outlived its control daemon.
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "doctor/doctor.hpp"
#include "kill/mps_terminate.hpp"
#include "proc/pid_files.hpp"
#include "proc/proc_io.hpp"
#include "text/human_format.hpp"
#include "text/shell_quote.hpp"

namespace gpureap {
namespace {

constexpr std::chrono::milliseconds kControlTimeout{3000};

std::string quit_command(const std::string& pipe_dir) {
  return fmt::format("echo quit | CUDA_MPS_PIPE_DIRECTORY={} nvidia-cuda-mps-control", shell_quote(pipe_dir));
}

void check_server(const Snapshot& snapshot, const GpuProcessView& server, Diagnosis& diagnosis) {
  const pid_t pid = static_cast<pid_t>(server.driver.pid);
  std::optional<MpsControl> control;
  std::string why;
  if (server.mps_control_daemon) control = find_mps_control(*server.mps_control_daemon, snapshot.table.options().proc_root, why);
  std::vector<pid_t> clients;
  for (const auto& v : snapshot.processes) {
    if (v.mps_server == pid && v.gpu_index == server.gpu_index) clients.push_back(static_cast<pid_t>(v.driver.pid));
  }
  std::string status;
  if (control) status = mps_command(*control, fmt::format("get_server_status {}", pid), kControlTimeout, why).value_or("");
  while (!status.empty() && (status.back() == '\n' || status.back() == ' ')) status.pop_back();
  const std::string pipe = control ? control->pipe_dir : std::string("<its pipe directory>");

  if (status == "FAULT") {
    Finding f;
    f.id = FindingId::MpsServerFault;
    f.severity = Severity::Critical;
    f.gpu = server.gpu_index;
    std::string list;
    for (pid_t c : clients) list += (list.empty() ? "" : " ") + std::to_string(c);
    f.summary = fmt::format("MPS server {} is faulted: a client ended with work outstanding; {} client{} left", pid,
                            clients.size(), clients.size() == 1 ? "" : "s");
    f.details.push_back(
        "A fatal error in one client reaches every client of the server: their GPU work is lost, and the server "
        "takes no new client (cudaErrorMpsServerNotReady) until all of them have exited; then it recovers.");
    if (!list.empty()) f.details.push_back("Clients still attached: " + list);
    f.evidence["server_pid"] = pid;
    f.evidence["control_daemon_pid"] = *server.mps_control_daemon;
    f.evidence["pipe_directory"] = pipe;
    f.evidence["clients"] = clients;
    f.remedies.push_back({"", Risk::None, "wait for the affected clients to exit by themselves: the server then recovers", false});
    if (!list.empty()) {
      f.remedies.push_back({"gpureap kill " + list, Risk::Medium,
                            "end the affected clients (their GPU work is already lost); the server recovers once they "
                            "are gone",
                            false});
    }
    f.remedies.push_back({quit_command(pipe), Risk::High,
                          "stop the control daemon and its servers: every MPS client on it loses its GPU work", false});
    diagnosis.findings.push_back(std::move(f));
    return;
  }
  // Idle: listed with memory, no client listed against it, on a driver that lists clients.
  if (!clients.empty() || !server.driver.used_memory || *server.driver.used_memory == 0) return;
  if (status.empty() && server.mps_clients == 0 && !server.mps_control_daemon) return;  // nothing more is known
  if (control) {
    const std::string listed = mps_command(*control, fmt::format("get_client_list {}", pid), kControlTimeout, why).value_or("x");
    if (listed.find_first_not_of(" \n") != std::string::npos) return;  // clients the driver does not list
  }
  Finding f;
  f.id = FindingId::MpsServerIdle;
  f.severity = Severity::Info;
  f.gpu = server.gpu_index;
  f.summary = fmt::format("MPS server {} holds {} with no client", pid, format_bytes(server.driver.used_memory));
  f.details.push_back("The control daemon keeps a server until the daemon quits, or until a client of another user "
                      "needs the GPU; its memory stays in use meanwhile.");
  f.evidence["server_pid"] = pid;
  f.evidence["control_daemon_pid"] = server.mps_control_daemon ? nlohmann::json(*server.mps_control_daemon) : nlohmann::json(nullptr);
  f.evidence["bytes"] = *server.driver.used_memory;
  f.remedies.push_back({"", Risk::None, "leave it: the next client of the same user starts faster", false});
  f.remedies.push_back({fmt::format("gpureap kill {}", pid), Risk::Low,
                        "end the idle server (no client loses work); the daemon starts a new one on demand", false});
  diagnosis.findings.push_back(std::move(f));
}

void check_pipe_directory(Diagnosis& diagnosis) {
  const char* env = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string dir = env != nullptr && *env != '\0' ? env : "/tmp/nvidia-mps";
  std::string why;
  const auto text = procfs::read_bounded_file(dir + "/nvidia-cuda-mps-control.pid", 64, "MPS pid file", why);
  if (!text) return;  // no daemon was ever started there (or it quit cleanly)
  const pid_t pid = std::atoi(text->c_str());
  if (pid > 1) {
    const auto stat = procfs::read_stat("/proc", pid);
    if (stat && stat->state != 'Z' && stat->comm == "nvidia-cuda-mps") return;  // its daemon runs
  }
  Finding f;
  f.id = FindingId::MpsStalePipeDirectory;
  f.severity = Severity::Warning;
  f.summary = fmt::format("MPS pipe directory {} outlived its control daemon (PID {} is gone)", dir, pid);
  f.details.push_back("The daemon did not quit cleanly (killed, or its host container stopped): its pid file and socket "
                      "remain. CUDA programs then run without MPS, and a daemon started again with the same "
                      "directory replaces them.");
  f.evidence["pipe_directory"] = dir;
  f.evidence["daemon_pid"] = pid;
  f.remedies.push_back({fmt::format("CUDA_MPS_PIPE_DIRECTORY={} nvidia-cuda-mps-control -d", shell_quote(dir)), Risk::Low,
                        "start the control daemon again where the clients look for it", false});
  f.remedies.push_back({fmt::format("rm {} {}", shell_quote(dir + "/nvidia-cuda-mps-control.pid"), shell_quote(dir + "/control")), Risk::Low,
                        "remove what the dead daemon left, when MPS is no longer wanted here", false});
  diagnosis.findings.push_back(std::move(f));
}

}  // namespace

void check_mps(const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis) {
  for (const auto& v : snapshot.processes) {
    if (v.mps_role == MpsRole::Server) check_server(snapshot, v, diagnosis);
  }
  if (options.check_mps_waiting) check_mps_waiting_clients(snapshot, diagnosis);
  check_pipe_directory(diagnosis);
}

}  // namespace gpureap
