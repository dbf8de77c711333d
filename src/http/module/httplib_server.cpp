// gpureap-http.so: an HTTP(S) server on cpp-httplib behind the C boundary of
// http/http_module_abi.hpp, and the module's entry table (with the client, httplib_client.cpp).
// Every request, whatever its path, goes to gpureap's handler (httplib's own routes match with
// std::regex, which gpureap never uses on input).
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <httplib.h>

#include "http/http_module_abi.hpp"
#include "http/module/gated_server.hpp"
#include "http/module/httplib_client.hpp"
#include "http/module/tls_context.hpp"

namespace {

// The kernel's queue of connections not yet accepted; cpp-httplib 0.11.4 listens with 5, so
// a burst of scrapes would see SYNs dropped and retried a second later.
constexpr int kListenBacklog = 512;

void set_error(char* error, std::size_t size, const std::string& text) {
  if (error != nullptr && size > 0) std::snprintf(error, size, "%s", text.c_str());
}

// Binds a socket of our own first, for the precise reason a bind fails (httplib says only
// that it did). SO_REUSEADDR as httplib's will be, so the two agree.
std::string probe_bind(const char* host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host, service.c_str(), &hints, &found); rc != 0) {
    return std::string("not a numeric address: ") + gai_strerror(rc);
  }
  std::string why;
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = std::strerror(errno);
  } else {
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0) why = std::strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(found);
  return why;
}

const char* request_header(const gpureap_http_request* request, const char* name) {
  const auto* req = static_cast<const httplib::Request*>(request->impl);
  const auto it = req->headers.find(name);
  return it == req->headers.end() ? "" : it->second.c_str();
}

void respond(void* response, int status, const char* content_type, const char* body, std::size_t body_size,
             const gpureap_http_header* headers, std::size_t header_count) {
  auto* res = static_cast<httplib::Response*>(response);
  res->status = status;
  for (std::size_t i = 0; i < header_count; ++i) res->set_header(headers[i].name, headers[i].value);
  res->set_content(body, body_size, content_type);
}

class ModuleServer {
 public:
  ModuleServer(std::unique_ptr<gpureap_http_serving::GatedServer> server, gpureap_http_handler_fn handler,
               void* context)
      : server_(std::move(server)),
        handler_(handler),
        context_(context) {}

  httplib::Server& server() { return *server_; }
  std::atomic<int> listening_fd{-1};  // set while binding

  httplib::Server::HandlerResponse handle(const httplib::Request& req, httplib::Response& res) {
    gpureap_http_request request{req.method.c_str(), req.path.c_str(), req.remote_addr.c_str(), request_header, &req};
    handler_(context_, &request, &res, respond);
    return httplib::Server::HandlerResponse::Handled;
  }

  int serve() {
    started_ = true;
    int result = 0;
    if (!stopping_) result = server_->listen_after_bind() || stopping_ ? 0 : -1;
    served_ = true;  // also when a stop came first: a later stop() must not wait for the loop
    server_->stop_gate();  // here, not in stop(): its workers may be in the handler
    return result;
  }

  // httplib's stop() does nothing until its accept loop runs: wait for it to start (or for
  // serve() to have ended), so that a stop right after start is not lost.
  void stop() {
    stopping_ = true;
    while (started_ && !served_ && !server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server_->stop();
  }

 private:
  std::unique_ptr<gpureap_http_serving::GatedServer> server_;
  gpureap_http_handler_fn handler_;
  void* context_;
  std::atomic<bool> started_{false}, served_{false}, stopping_{false};
};

void* create(const gpureap_http_server_config* config, int* bound_port, char* error, std::size_t error_size) {
  try {
    if (const std::string why = probe_bind(config->host, config->port); !why.empty()) {
      set_error(error, error_size, why);
      return nullptr;
    }
    const unsigned workers = config->worker_threads > 0 ? config->worker_threads : 1;
    gpureap_http_serving::TlsContext tls;
    if (config->cert_file != nullptr) {
      tls = gpureap_http_serving::make_server_tls_context(config->cert_file, config->key_file);
      if (tls == nullptr) {
        set_error(error, error_size, "the TLS certificate or key was refused (not PEM, or they do not match)");
        return nullptr;
      }
    }
    auto server = std::make_unique<gpureap_http_serving::GatedServer>(
        workers, std::chrono::milliseconds(config->io_timeout_ms), std::move(tls));
    auto wrapped = std::make_unique<ModuleServer>(std::move(server), config->handler, config->context);
    httplib::Server& s = wrapped->server();
    ModuleServer* raw = wrapped.get();
    // Instead of httplib's SO_REUSEPORT, which would let a second exporter bind the same
    // port and take half the scrapes.
    // TCP_NODELAY (accepted sockets inherit it): httplib writes the headers and the body
    // separately, and with Nagle the body waited for the client's delayed ACK of the headers,
    // 40 ms on every keep-alive scrape after the first.
    s.set_tcp_nodelay(true);
    s.set_socket_options([raw](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      raw->listening_fd = sock;
    });
    const time_t seconds = config->io_timeout_ms / 1000;
    const time_t micros = (config->io_timeout_ms % 1000) * 1000;
    s.set_read_timeout(seconds, micros);
    s.set_write_timeout(seconds, micros);
    s.set_keep_alive_timeout(2);  // a worker waits at most this for the next request of a connection
    s.set_payload_max_length(64 * 1024);
    s.set_pre_routing_handler(
        [raw](const httplib::Request& req, httplib::Response& res) { return raw->handle(req, res); });
    if (!s.bind_to_port(config->host, config->port, AI_NUMERICHOST | AI_PASSIVE)) {
      set_error(error, error_size, "cannot bind the address");
      return nullptr;
    }
    const int listening_fd = raw->listening_fd;
    if (listening_fd >= 0) ::listen(listening_fd, kListenBacklog);  // raises the backlog of a listening socket
    int port = config->port;
    if (port == 0 && listening_fd >= 0) {
      sockaddr_storage address{};
      socklen_t length = sizeof(address);
      if (::getsockname(listening_fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
        port = address.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port)
                                             : ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
      }
    }
    *bound_port = port;
    return wrapped.release();
  } catch (const std::exception& e) {
    set_error(error, error_size, e.what());
  } catch (...) {
    set_error(error, error_size, "unknown error");
  }
  return nullptr;
}

int serve(void* server) {
  try {
    return static_cast<ModuleServer*>(server)->serve();
  } catch (...) {
    return -1;
  }
}

void stop(void* server) {
  try {
    static_cast<ModuleServer*>(server)->stop();
  } catch (...) {
  }
}

void destroy(void* server) { delete static_cast<ModuleServer*>(server); }

const gpureap_http_module_api kApi{GPUREAP_HTTP_MODULE_ABI,
                                   GPUREAP_VERSION,
                                   create,
                                   serve,
                                   stop,
                                   destroy,
                                   gpureap_http_module_client::open,
                                   gpureap_http_module_client::get,
                                   gpureap_http_module_client::close,
                                   gpureap_http_module_client::post};

}  // namespace

extern "C" __attribute__((visibility("default"))) const gpureap_http_module_api* gpureap_http_module(void) {
  return &kApi;
}
