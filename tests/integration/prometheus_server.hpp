// A real Prometheus server (/usr/bin/prometheus) for the end-to-end fleet test, and the
// daemons around it (gpureap export): started in the background on loopback, ended on
// destruction. Prometheus gets a temporary storage directory and a configuration the test
// writes; its log goes to a file beside it.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpureap::test {

inline constexpr const char* kPrometheusBinary = "/usr/bin/prometheus";

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick).
int free_loopback_port();

// A daemon in a session of its own; SIGTERM on destruction, SIGKILL if it lingers.
class BackgroundProcess {
 public:
  BackgroundProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                    const std::string& log_path);
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;
  pid_t pid() const { return pid_; }
  bool running();  // false once it has exited (reaped)
  std::string log() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string log_path_;
};

// HTTP GET on 127.0.0.1:port; the body, or "" with *status 0 when nothing answered.
std::string http_get(int port, const std::string& path, int* status = nullptr);

class PrometheusServer {
 public:
  // `config` is the YAML of prometheus.yml; `dir` holds it, the storage and the log.
  PrometheusServer(const std::string& dir, const std::string& config);
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // /api/v1/query: the "data" object, or null when the server did not answer with success.
  nlohmann::json query(const std::string& promql);
  nlohmann::json api(const std::string& path);  // GET /api/v1/<path>: "data", or null
  std::string log() const { return process_.log(); }
  bool running() { return process_.running(); }

 private:
  int port_;
  BackgroundProcess process_;
};

}  // namespace gpureap::test
