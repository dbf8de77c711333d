#include "fake_prometheus.hpp"

#include <cmath>

#include "sim_harness.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>

namespace gpureap::test {

TlsFiles make_self_signed_certificate(const std::string& dir) {
  TlsFiles files{dir, dir + "/cert.pem", dir + "/key.pem"};
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  if (key == nullptr || cert == nullptr) throw std::runtime_error("OpenSSL could not make a key");
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, cert, cert, nullptr, nullptr, 0);
  for (const auto& [nid, value] : std::vector<std::pair<int, const char*>>{
           {NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost"}, {NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
    X509_add_ext(cert, extension, -1);
    X509_EXTENSION_free(extension);
  }
  X509_sign(cert, key, EVP_sha256());
  FILE* c = std::fopen(files.certificate.c_str(), "w");
  FILE* k = std::fopen(files.key.c_str(), "w");
  if (c == nullptr || k == nullptr) throw std::runtime_error("cannot write the certificate in " + dir);
  PEM_write_X509(c, cert);
  PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(c);
  std::fclose(k);
  X509_free(cert);
  EVP_PKEY_free(key);
  return files;
}

FakePrometheus::FakePrometheus(const TlsFiles* tls) : https_(tls != nullptr) {
  if (tls != nullptr) {
    server_ = std::make_unique<httplib::SSLServer>(tls->certificate.c_str(), tls->key.c_str());
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  // Headers and body leave in separate writes: with Nagle's algorithm each answer would wait
  // for the client's delayed ACK (~40 ms a query).
  server_->set_tcp_nodelay(true);
  server_->Get("/api/v1/query", [this](const httplib::Request& request, httplib::Response& response) {
    answer(request, response);
  });
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("the fake Prometheus could not bind");
  // Bound and listening already: a client may connect before the loop below accepts.
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

FakePrometheus::~FakePrometheus() {
  // stop() before the accept loop runs would be lost, and join() would wait for ever.
  eventually([this] { return server_->is_running(); }, 10000);
  server_->stop();
  thread_.join();
}

std::string FakePrometheus::url() const {
  return (https_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_);
}

void FakePrometheus::add_series(const std::string& needle, nlohmann::json labels, double value) {
  std::lock_guard lock(mutex_);
  series_.push_back(Series{needle, std::move(labels), value});
}

void FakePrometheus::add_host(const std::string& instance) {
  for (const std::string gpu : {"0", "1"}) {
    add_series("gpureap_gpu_info", {{"instance", instance}, {"gpu", gpu}, {"uuid", "GPU-" + instance + "-" + gpu}, {"name", "Simulated"}}, 1);
    add_series("gpureap_gpu_memory_total_bytes", {{"instance", instance}, {"gpu", gpu}}, 80.0 * (1ull << 30));
    add_series("gpureap_gpu_memory_used_bytes", {{"instance", instance}, {"gpu", gpu}}, gpu == "0" ? 12.0 * (1ull << 30) : 0);
    add_series("gpureap_gpu_memory_unattributed_bytes", {{"instance", instance}, {"gpu", gpu}}, 0);
    add_series("gpureap_gpu_orphaned_holders", {{"instance", instance}, {"gpu", gpu}}, 0);
    add_series("gpureap_gpu_lost", {{"instance", instance}, {"gpu", gpu}}, 0);
  }
  add_series("gpureap_user_gpu_memory_bytes", {{"instance", instance}, {"gpu", "0"}, {"user", "alice"}}, 12.0 * (1ull << 30));
  add_series("max by (instance) (gpureap_driver_up)", {{"instance", instance}}, 1);
  add_series("(up and on", {{"instance", instance}}, 1);
}

void FakePrometheus::on_query(std::function<void(const httplib::Request&, httplib::Response&)> handler) {
  std::lock_guard lock(mutex_);
  handler_ = std::move(handler);
}

void FakePrometheus::require_basic_auth(const std::string& user, const std::string& password) {
  std::lock_guard lock(mutex_);
  authorization_ = httplib::make_basic_authentication_header(user, password).second;
}

std::vector<std::string> FakePrometheus::queries() const {
  std::lock_guard lock(mutex_);
  return queries_;
}

void FakePrometheus::answer(const httplib::Request& request, httplib::Response& response) {
  std::function<void(const httplib::Request&, httplib::Response&)> handler;
  nlohmann::json result = nlohmann::json::array();
  {
    std::lock_guard lock(mutex_);
    const std::string query = request.get_param_value("query");
    queries_.push_back(query);
    if (!authorization_.empty() && request.get_header_value("Authorization") != authorization_) {
      response.status = 401;
      response.set_content("Unauthorized", "text/plain");
      return;
    }
    handler = handler_;
    if (query == "vector(time())") {
      result.push_back({{"metric", nlohmann::json::object()}, {"value", {kFakeNow, std::to_string(kFakeNow)}}});
    }
    for (const auto& s : series_) {
      if (query.find(s.needle) == std::string::npos) continue;
      // As Prometheus writes sample values: "NaN", "+Inf", "-Inf", or the number.
      const std::string text = std::isnan(s.value)   ? "NaN"
                               : std::isinf(s.value) ? (s.value > 0 ? "+Inf" : "-Inf")
                                                     : nlohmann::json(s.value).dump();
      result.push_back({{"metric", s.labels}, {"value", {kFakeNow, text}}});
    }
  }
  if (handler) return handler(request, response);
  const nlohmann::json body = {{"status", "success"}, {"data", {{"resultType", "vector"}, {"result", result}}}};
  response.set_content(body.dump(), "application/json");
}

RawHttpServer::RawHttpServer(std::string head, std::string more, int interval_ms, Pace pace)
    : head_(std::move(head)), drip_(std::move(more)), interval_ms_(interval_ms), pace_(pace) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(listen_fd_, 8) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("the raw HTTP server could not listen");
  }
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { serve(); });
}

RawHttpServer::~RawHttpServer() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

std::string RawHttpServer::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void RawHttpServer::serve() {
  std::vector<int> clients;
  std::size_t dripped = 0;
  while (!stop_) {
    pollfd waiting{listen_fd_, POLLIN, 0};
    if (::poll(&waiting, 1, interval_ms_) == 1) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        (void)::send(client, head_.data(), head_.size(), MSG_NOSIGNAL);
        clients.push_back(client);
      }
      continue;
    }
    if (drip_.empty()) continue;
    if (pace_ == Pace::Flood) {
      // As fast as the client takes it, until it goes away or the server is stopped.
      for (int client : clients) {
        pollfd writable{client, POLLOUT, 0};
        while (!stop_ && ::poll(&writable, 1, 50) >= 0) {
          if ((writable.revents & POLLOUT) != 0 &&
              ::send(client, drip_.data(), drip_.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN) {
            break;
          }
          if ((writable.revents & (POLLERR | POLLHUP)) != 0) break;
        }
      }
      continue;
    }
    for (int client : clients) (void)::send(client, &drip_[dripped % drip_.size()], 1, MSG_NOSIGNAL);
    ++dripped;
  }
  for (int client : clients) ::close(client);
}

std::string gzip_of_zeros(std::size_t size) {
  z_stream stream{};
  deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  const std::string zeros(1 << 20, '\0');
  std::string out;
  char buffer[1 << 16];
  for (std::size_t done = 0; done < size; done += zeros.size()) {
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
    stream.avail_in = static_cast<uInt>(std::min(zeros.size(), size - done));
    const int flush = done + zeros.size() >= size ? Z_FINISH : Z_NO_FLUSH;
    do {
      stream.next_out = reinterpret_cast<Bytef*>(buffer);
      stream.avail_out = sizeof buffer;
      deflate(&stream, flush);
      out.append(buffer, sizeof buffer - stream.avail_out);
    } while (stream.avail_out == 0);
  }
  deflateEnd(&stream);
  return out;
}

}  // namespace gpureap::test
