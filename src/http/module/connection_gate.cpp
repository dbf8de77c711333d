#include "http/module/connection_gate.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string_view>

#include "http/module/request_head.hpp"

namespace gpureap_http_serving {
namespace {

// The client learns why, if its socket takes these few bytes at once; the gate never waits.
void refuse(ClientConnection& connection, RequestArrival why) {
  const std::string_view answer =
      why == RequestArrival::kTooLarge
          ? "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
          : "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  if (connection.tls != nullptr) {
    ERR_clear_error();
    SSL_write(connection.tls.get(), answer.data(), static_cast<int>(answer.size()));
  } else {
    [[maybe_unused]] const ssize_t sent =
        ::send(connection.fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  close_connection(connection);
}

// Reads what the connection has for the gate: > 0 bytes read, 0 the end or an error, -1
// nothing now (`wanted` says which event to wait for: under TLS, a read may need to write).
ssize_t read_some(ClientConnection& connection, char* buffer, std::size_t size, std::uint32_t& wanted) {
  wanted = EPOLLIN;
  if (connection.tls == nullptr) {
    for (;;) {
      const ssize_t n = ::recv(connection.fd, buffer, size, MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
      if (errno != EINTR) return 0;
    }
  }
  // The handshake first, as far as the client's bytes take it.
  SSL* session = connection.tls.get();
  ERR_clear_error();
  int n = SSL_is_init_finished(session) != 0 ? 1 : SSL_accept(session);
  if (n == 1) {
    ERR_clear_error();
    n = SSL_read(session, buffer, static_cast<int>(size));
    if (n > 0) return n;
  }
  switch (SSL_get_error(session, n)) {
    case SSL_ERROR_WANT_READ:
      return -1;
    case SSL_ERROR_WANT_WRITE:
      wanted = EPOLLOUT;
      return -1;
    default:
      return 0;  // the client closed, or broke the protocol
  }
}

}  // namespace

ConnectionGate::ConnectionGate(std::size_t capacity, ReadyFn ready)
    : capacity_(std::max<std::size_t>(capacity, 1)), ready_(std::move(ready)) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    throw std::runtime_error("cannot create the connection gate's epoll or eventfd");
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
  thread_ = std::thread([this] { run(); });
}

ConnectionGate::~ConnectionGate() {
  stop();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void ConnectionGate::admit(ClientConnection connection, Clock::duration patience) {
  {
    std::lock_guard lock(mutex_);
    if (!stopped_) {
      admitted_.emplace_back(std::move(connection), Clock::now() + patience);
      connection.fd = -1;
    }
  }
  close_connection(connection);  // a no-op unless the gate had stopped
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof one);
}

void ConnectionGate::stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

void ConnectionGate::run() {
  std::vector<epoll_event> events(256);
  for (;;) {
    const int count = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), next_timeout_ms());
    if (count < 0 && errno != EINTR) break;
    for (int i = 0; i < count; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        std::uint64_t drained = 0;
        [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &drained, sizeof drained);
      } else if (waiting_.count(fd) != 0) {
        receive(fd);
      }
    }
    take_admitted();
    close_expired();
    std::lock_guard lock(mutex_);
    if (stopped_) break;
  }
  std::vector<std::pair<ClientConnection, Clock::time_point>> late;
  {
    std::lock_guard lock(mutex_);
    late.swap(admitted_);
  }
  for (auto& [connection, deadline] : late) close_connection(connection);
  while (!waiting_.empty()) drop(waiting_.begin()->first);
}

void ConnectionGate::take_admitted() {
  std::vector<std::pair<ClientConnection, Clock::time_point>> admitted;
  {
    std::lock_guard lock(mutex_);
    admitted.swap(admitted_);
  }
  for (auto& [connection, deadline] : admitted) {
    // A kept-alive connection may bring its next request along (pipelined).
    const RequestArrival arrival = assess_request(connection.received);
    switch (arrival) {
      case RequestArrival::kComplete:
        ready_(std::move(connection));
        break;
      case RequestArrival::kTooLarge:
      case RequestArrival::kRefused:
        refuse(connection, arrival);
        break;
      case RequestArrival::kIncomplete: {
        // A TLS session may hold a next request already decrypted, which epoll cannot tell,
        // and a new one starts its handshake here.
        const int fd = connection.fd;
        const bool tls = connection.tls != nullptr;
        wait_on(std::move(connection), deadline);
        if (tls && waiting_.count(fd) != 0) receive(fd);
        break;
      }
    }
  }
}

void ConnectionGate::wait_on(ClientConnection connection, Clock::time_point deadline) {
  if (waiting_.size() >= capacity_) drop(by_arrival_.begin()->second);
  const int fd = connection.fd;
  epoll_event event{};
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
    close_connection(connection);
    return;
  }
  const std::uint64_t arrival = next_arrival_++;
  waiting_.emplace(fd, Waiting{std::move(connection), deadline, arrival, EPOLLIN});
  by_deadline_.emplace(deadline, fd);
  by_arrival_.emplace(arrival, fd);
}

void ConnectionGate::receive(int fd) {
  Waiting& waiting = waiting_.at(fd);
  char buffer[4096];
  for (;;) {
    std::string& received = waiting.connection.received;
    const std::size_t room = kMaxRequestBytes - std::min(received.size(), kMaxRequestBytes);
    std::uint32_t wanted = EPOLLIN;
    const std::size_t asked = std::min(sizeof buffer, std::max<std::size_t>(room, 1));
    const ssize_t n = read_some(waiting.connection, buffer, asked, wanted);
    if (n > 0) {
      received.append(buffer, static_cast<std::size_t>(n));
      const RequestArrival arrival = assess_request(received);
      if (arrival == RequestArrival::kComplete) return ready_(release(fd));
      if (arrival == RequestArrival::kTooLarge || arrival == RequestArrival::kRefused) {
        ClientConnection refused = release(fd);
        return refuse(refused, arrival);
      }
      continue;
    }
    if (n < 0) return watch_for(waiting, fd, wanted);
    return drop(fd);  // the client closed, or the connection broke, before its request was whole
  }
}

void ConnectionGate::watch_for(Waiting& waiting, int fd, std::uint32_t wanted) {
  if (waiting.events == wanted) return;
  epoll_event event{};
  event.events = wanted | EPOLLRDHUP;
  event.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event) != 0) return drop(fd);
  waiting.events = wanted;
}

ClientConnection ConnectionGate::release(int fd) {
  auto it = waiting_.find(fd);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  by_deadline_.erase({it->second.deadline, fd});
  by_arrival_.erase(it->second.arrival);
  ClientConnection connection = std::move(it->second.connection);
  waiting_.erase(it);
  return connection;
}

void ConnectionGate::drop(int fd) {
  ClientConnection connection = release(fd);
  close_connection(connection);
}

void ConnectionGate::close_expired() {
  const Clock::time_point now = Clock::now();
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) drop(by_deadline_.begin()->second);
}

int ConnectionGate::next_timeout_ms() const {
  if (by_deadline_.empty()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(by_deadline_.begin()->first - Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 60'000));
}

}  // namespace gpureap_http_serving
