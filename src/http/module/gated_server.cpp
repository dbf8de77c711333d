#include "http/module/gated_server.hpp"

#include <fcntl.h>
#include <sys/resource.h>

#include <algorithm>
#include <utility>

#include "http/module/deadline_stream.hpp"

namespace gpureap_http_serving {
namespace {

// At most this many connections wait for their request; fewer when the descriptor limit is
// low, so that eviction, not accept()'s EMFILE, is what a flood of idle or partial requests
// meets. (Whole requests handed to the workers are not counted: a flood of them that the
// workers cannot keep up with can still take every descriptor for a moment.)
constexpr std::size_t kMaxWaiting = 1024;
constexpr std::size_t kDescriptorsKeptFree = 128;

std::size_t waiting_capacity() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return kMaxWaiting;
  const std::size_t usable = limit.rlim_cur > 2 * kDescriptorsKeptFree ? limit.rlim_cur - kDescriptorsKeptFree
                                                                        : limit.rlim_cur / 2;
  return std::clamp<std::size_t>(usable, 1, kMaxWaiting);
}

}  // namespace

GatedServer::GatedServer(unsigned workers, std::chrono::milliseconds io_timeout, TlsContext tls)
    : io_timeout_(io_timeout),
      tls_(std::move(tls)),
      gate_(std::make_unique<ConnectionGate>(waiting_capacity(),
                                             [this](ClientConnection connection) {
                                               // Through a shared_ptr: std::function needs a copyable task.
                                               auto ready = std::make_shared<ClientConnection>(std::move(connection));
                                               workers_->enqueue([this, ready] { handle(std::move(*ready)); });
                                             })),
      workers_(std::make_unique<httplib::ThreadPool>(std::max(workers, 1U))) {
  // httplib's own pool only hands sockets to the gate.
  new_task_queue = [] { return new httplib::ThreadPool(1); };
}

GatedServer::~GatedServer() { stop_gate(); }

void GatedServer::stop_gate() {
  if (stopping_.exchange(true)) return;
  gate_->stop();       // no more ready connections after this
  workers_->shutdown();  // queued ones are closed unread (handle() sees stopping_)
}

bool GatedServer::process_and_close_socket(socket_t sock) {
  ClientConnection connection{sock, {}, 0, nullptr};
  if (tls_ != nullptr) {
    // Non-blocking: the gate drives the handshake with epoll, the workers with poll().
    const int flags = ::fcntl(sock, F_GETFL);
    connection.tls.reset(SSL_new(tls_.get()));
    if (flags < 0 || ::fcntl(sock, F_SETFL, flags | O_NONBLOCK) != 0 || connection.tls == nullptr ||
        SSL_set_fd(connection.tls.get(), sock) != 1) {
      close_connection(connection);
      return true;
    }
  }
  gate_->admit(std::move(connection), io_timeout_);
  return true;
}

void GatedServer::handle(ClientConnection connection) {
  if (stopping_) return close_connection(connection);
  DeadlineStream stream(connection, DeadlineStream::Clock::now() + io_timeout_, io_timeout_);
  const bool last = connection.answered + 1 >= keep_alive_max_count_;
  bool closed_by_request = false;
  const bool answered = process_request(stream, last, closed_by_request, nullptr);
  ++connection.answered;
  if (!answered || closed_by_request || last || stopping_) return close_connection(connection);
  stream.keep_unread();
  gate_->admit(std::move(connection), std::chrono::seconds(keep_alive_timeout_sec_));
}

}  // namespace gpureap_http_serving
