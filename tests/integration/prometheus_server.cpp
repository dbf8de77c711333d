#include "prometheus_server.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <httplib.h>

#include "sim_harness.hpp"

namespace gpureap::test {

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw std::runtime_error("no free port on 127.0.0.1");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                                     const std::string& log_path)
    : log_path_(log_path) {
  SpawnOptions options;
  options.env = env;
  options.new_process_group = false;  // setsid below
  const PreparedExec exec(argv, options);  // nothing is allocated after fork()
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setsid();
    const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (log >= 0) {
      ::dup2(log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
    }
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    exec.exec_in_child(false);
  }
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(pid_, SIGTERM);
  if (!eventually([this] { return !running(); }, 5000)) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool BackgroundProcess::running() {
  if (reaped_) return false;
  if (::waitpid(pid_, nullptr, WNOHANG) == pid_) reaped_ = true;
  return !reaped_;
}

std::string BackgroundProcess::log() const { return read_text_file(log_path_); }

std::string http_get(int port, const std::string& path, int* status) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  const auto result = client.Get(path);
  if (status != nullptr) *status = result ? result->status : 0;
  return result ? result->body : std::string();
}

namespace {

std::string write_config(const std::string& dir, const std::string& config) {
  const std::string path = dir + "/prometheus.yml";
  std::ofstream(path) << config;
  return path;
}

}  // namespace

PrometheusServer::PrometheusServer(const std::string& dir, const std::string& config)
    : port_(free_loopback_port()),
      process_({kPrometheusBinary, "--config.file=" + write_config(dir, config), "--storage.tsdb.path=" + dir + "/data",
                "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"},
               {}, dir + "/prometheus.log") {}

nlohmann::json PrometheusServer::api(const std::string& path) {
  int status = 0;
  const std::string body = http_get(port_, "/api/v1/" + path, &status);
  if (status != 200) return nullptr;
  const auto json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_discarded() || json.value("status", "") != "success") return nullptr;
  return json["data"];
}

nlohmann::json PrometheusServer::query(const std::string& promql) {
  return api("query?query=" + httplib::detail::encode_query_param(promql));
}

}  // namespace gpureap::test
