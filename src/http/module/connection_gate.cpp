#include "http/module/connection_gate.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

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
  [[maybe_unused]] const ssize_t sent = ::send(connection.fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  close_connection(connection);
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
      case RequestArrival::kIncomplete:
        wait_on(std::move(connection), deadline);
        break;
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
  waiting_.emplace(fd, Waiting{std::move(connection), deadline, arrival});
  by_deadline_.emplace(deadline, fd);
  by_arrival_.emplace(arrival, fd);
}

void ConnectionGate::receive(int fd) {
  std::string& received = waiting_.at(fd).connection.received;
  char buffer[4096];
  for (;;) {
    const std::size_t room = kMaxRequestBytes - std::min(received.size(), kMaxRequestBytes);
    const ssize_t n = ::recv(fd, buffer, std::min(sizeof buffer, std::max<std::size_t>(room, 1)), MSG_DONTWAIT);
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
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return drop(fd);  // the client closed, or the connection broke, before its request was whole
  }
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
