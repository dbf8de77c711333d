// The client half of gpureap-http.so: cpp-httplib's client behind the C boundary of
// http/http_module_abi.hpp, for `gpureap fleet`. Exceptions never cross it.
#include "http/module/httplib_client.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "http/module/call_watch.hpp"

namespace gpureap_http_module_client {
namespace {

int error_code(httplib::Error error) {
  switch (error) {
    case httplib::Error::Success: return GPUREAP_HTTP_OK;
    case httplib::Error::Connection: return GPUREAP_HTTP_CONNECTION;
    case httplib::Error::ConnectionTimeout: return GPUREAP_HTTP_CONNECTION_TIMEOUT;
    case httplib::Error::Read: return GPUREAP_HTTP_READ;
    case httplib::Error::Write: return GPUREAP_HTTP_WRITE;
    case httplib::Error::SSLConnection: return GPUREAP_HTTP_TLS_HANDSHAKE;
    case httplib::Error::SSLLoadingCerts: return GPUREAP_HTTP_TLS_CA_FILE;
    case httplib::Error::SSLServerVerification: return GPUREAP_HTTP_TLS_UNTRUSTED;
    case httplib::Error::Compression: return GPUREAP_HTTP_COMPRESSION;
    case httplib::Error::Canceled: return GPUREAP_HTTP_CANCELED;
    default: return GPUREAP_HTTP_OTHER;
  }
}

class Interruptible {
 public:
  virtual ~Interruptible() = default;
  virtual CallSocket call_socket() const = 0;
  // From the watch's thread: ends the call's blocked reads and writes.
  virtual void interrupt() = 0;
};

// httplib's client (plain or TLS) that knows its socket, so that a CallWatch can shut it.
template <class Base>
class Guarded final : public Base, public Interruptible {
 public:
  template <class... Args>
  explicit Guarded(Args&&... args) : Base(std::forward<Args>(args)...) {
    this->set_socket_options([this](socket_t fd) {
      httplib::default_socket_options(fd);
      fd_.store(fd);
      generation_.fetch_add(1);
    });
  }

  CallSocket call_socket() const override { return {fd_.load(), generation_.load()}; }

  void interrupt() override {
    std::unique_lock lock(this->socket_mutex_, std::try_to_lock);
    if (lock.owns_lock()) {
      busy_since_ = {};
      // httplib's own way to end a request from another thread (what stop() does).
      if (this->socket_requests_in_flight_ > 0) {
        this->shutdown_socket(this->socket_);
        this->socket_should_be_closed_when_request_is_done_ = true;
      }
      return;
    }
    // httplib holds its socket lock while it connects and does the TLS handshake: a handshake
    // dripped byte by byte is ended on the descriptor itself, once the lock has stayed taken
    // longer than any other step holds it.
    const auto now = std::chrono::steady_clock::now();
    if (busy_since_ == std::chrono::steady_clock::time_point{}) busy_since_ = now;
    if (now - busy_since_ >= std::chrono::milliseconds(50) && fd_.load() >= 0) ::shutdown(fd_.load(), SHUT_RDWR);
  }

 private:
  std::atomic<int> fd_{-1};
  std::atomic<unsigned> generation_{0};
  std::chrono::steady_clock::time_point busy_since_{};  // the watch's thread only
};

struct ModuleClient {
  std::unique_ptr<httplib::ClientImpl> http;
  Interruptible* control = nullptr;
};

// Each wait may take what is left of the whole call; the watch ends it at the deadline.
void set_timeouts(httplib::ClientImpl& client, long long timeout_us) {
  const time_t seconds = static_cast<time_t>(timeout_us / 1000000);
  const time_t micros = static_cast<time_t>(timeout_us % 1000000);
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  client.set_write_timeout(seconds, micros);
}

template <typename Request>
std::unique_ptr<CallWatch> watch_call(ModuleClient& client, const Request* request) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(request->timeout_us);
  std::function<bool()> cancelled;
  if (request->cancelled != nullptr) cancelled = [request] { return request->cancelled(request->context) != 0; };
  Interruptible* control = client.control;
  return std::make_unique<CallWatch>(
      deadline, std::move(cancelled), [control] { return control->call_socket(); }, [control] { control->interrupt(); });
}

int ended_by_watch(const CallWatch& watch, int result) {
  switch (watch.end()) {
    case CallEnd::Running: return result;
    case CallEnd::Deadline: return GPUREAP_HTTP_DEADLINE;
    case CallEnd::HeadTooLarge: return GPUREAP_HTTP_HEAD_TOO_LARGE;
    case CallEnd::Cancelled: return GPUREAP_HTTP_CANCELED;
  }
  return result;
}

}  // namespace

void* open(const gpureap_http_client_config* config) {
  try {
    auto client = std::make_unique<ModuleClient>();
    if (config->https) {
      auto https = std::make_unique<Guarded<httplib::SSLClient>>(config->host, config->port);
      https->enable_server_certificate_verification(config->verify_certificate != 0);
      if (config->ca_file != nullptr && *config->ca_file != '\0') https->set_ca_cert_path(config->ca_file);
      client->control = https.get();
      client->http = std::move(https);
    } else {
      auto plain = std::make_unique<Guarded<httplib::ClientImpl>>(config->host, config->port);
      client->control = plain.get();
      client->http = std::move(plain);
    }
    httplib::ClientImpl& http = *client->http;
    http.set_keep_alive(true);
    http.set_tcp_nodelay(true);  // a request's headers and body are separate writes (see the server)
    http.set_follow_location(false);  // a redirect is reported, never followed
    if (config->basic_user != nullptr) {
      http.set_basic_auth(config->basic_user, config->basic_password ? config->basic_password : "");
    }
    return client.release();
  } catch (...) {
    return nullptr;
  }
}

int get(void* handle, const gpureap_http_get* request) {
  auto& client = *static_cast<ModuleClient*>(handle);
  try {
    set_timeouts(*client.http, request->timeout_us);
    httplib::Params params;
    for (std::size_t i = 0; i < request->param_count; ++i) {
      params.emplace(request->params[2 * i], request->params[2 * i + 1]);
    }
    const auto watch = watch_call(client, request);
    const auto result = client.http->Get(
        request->path, params, httplib::Headers{{"Accept", "application/json"}},
        [request, &watch](const httplib::Response& response) {
          watch->head_done();
          const std::string location = response.get_header_value("Location");
          return request->on_status(request->context, response.status, location.c_str()) != 0;
        },
        [request](const char* data, std::size_t length) {
          return request->on_body(request->context, data, length) != 0;
        });
    return ended_by_watch(*watch, result ? GPUREAP_HTTP_OK : error_code(result.error()));
  } catch (const std::bad_alloc&) {
    return GPUREAP_HTTP_OUT_OF_MEMORY;
  } catch (...) {
    return GPUREAP_HTTP_OTHER;
  }
}

int post(void* handle, const gpureap_http_post* request) {
  auto& client = *static_cast<ModuleClient*>(handle);
  try {
    set_timeouts(*client.http, request->timeout_us);
    // A request of our own, so that the answer's body is streamed to on_body (which bounds it)
    // rather than gathered whole.
    const auto watch = watch_call(client, request);
    httplib::Request req;
    req.method = "POST";
    req.path = request->path;
    req.headers.emplace("Content-Type", request->content_type);
    req.body.assign(request->body, request->body_size);
    req.content_receiver = [request, &watch](const char* data, std::size_t length, std::uint64_t, std::uint64_t) {
      watch->head_done();
      return request->on_body(request->context, data, length) != 0;
    };
    const auto result = client.http->send(req);
    const int ended = ended_by_watch(*watch, result ? GPUREAP_HTTP_OK : error_code(result.error()));
    if (ended != GPUREAP_HTTP_OK) return ended;
    // The status from the result: a request's own response_handler is not called by the
    // library's send() (0.11.4 as Debian builds it).
    const std::string location = result->get_header_value("Location");
    request->on_status(request->context, result->status, location.c_str());
    return GPUREAP_HTTP_OK;
  } catch (const std::bad_alloc&) {
    return GPUREAP_HTTP_OUT_OF_MEMORY;
  } catch (...) {
    return GPUREAP_HTTP_OTHER;
  }
}

void close(void* client) { delete static_cast<ModuleClient*>(client); }

}  // namespace gpureap_http_module_client
