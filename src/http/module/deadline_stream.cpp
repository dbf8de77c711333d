#include "http/module/deadline_stream.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gpureap_http_serving {
namespace {

using Clock = DeadlineStream::Clock;

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  if ((peer ? ::getpeername(fd, raw, &size) : ::getsockname(fd, raw, &size)) != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    port = ntohs(in6->sin6_port);
  }
  ip = text;
}

}  // namespace

DeadlineStream::DeadlineStream(ClientConnection& connection, Clock::time_point read_deadline,
                               Clock::duration io_timeout)
    : connection_(connection), read_deadline_(read_deadline), io_timeout_(io_timeout) {}

bool DeadlineStream::wait_for(short events, Clock::time_point deadline) const {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd entry{connection_.fd, events, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::min<long long>(left, 60'000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

bool DeadlineStream::is_readable() const {
  return consumed_ < connection_.received.size() ||
         (connection_.tls != nullptr && SSL_pending(connection_.tls.get()) > 0) || wait_for(POLLIN, read_deadline_);
}

ssize_t DeadlineStream::through_tls(char* read_into, const char* write_from, std::size_t size,
                                    Clock::time_point deadline) {
  SSL* session = connection_.tls.get();
  const int length = static_cast<int>(std::min<std::size_t>(size, 1 << 30));
  for (;;) {
    ERR_clear_error();
    const int n = write_from != nullptr ? SSL_write(session, write_from, length) : SSL_read(session, read_into, length);
    if (n > 0) return n;
    switch (SSL_get_error(session, n)) {
      case SSL_ERROR_WANT_READ:
        if (!wait_for(POLLIN, deadline)) return -1;
        break;
      case SSL_ERROR_WANT_WRITE:
        if (!wait_for(POLLOUT, deadline)) return -1;
        break;
      case SSL_ERROR_ZERO_RETURN:
        return 0;
      default:
        return -1;
    }
  }
}

bool DeadlineStream::is_writable() const {
  return wait_for(POLLOUT, writing_ ? write_deadline_ : Clock::now() + io_timeout_);
}

ssize_t DeadlineStream::read(char* ptr, size_t size) {
  if (consumed_ < connection_.received.size()) {
    const std::size_t n = std::min(size, connection_.received.size() - consumed_);
    std::memcpy(ptr, connection_.received.data() + consumed_, n);
    consumed_ += n;
    return static_cast<ssize_t>(n);
  }
  // Straight into the caller's buffer: nothing read past what httplib asks for, so a
  // pipelined next request stays in the socket (or the TLS session) for the gate.
  if (connection_.tls != nullptr) return through_tls(ptr, nullptr, size, read_deadline_);
  for (;;) {
    if (!wait_for(POLLIN, read_deadline_)) return -1;
    const ssize_t n = ::recv(connection_.fd, ptr, size, MSG_DONTWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EINTR)) return n;
  }
}

ssize_t DeadlineStream::write(const char* ptr, size_t size) {
  if (!writing_) {
    writing_ = true;
    write_deadline_ = Clock::now() + io_timeout_;
  }
  if (connection_.tls != nullptr) return through_tls(nullptr, ptr, size, write_deadline_);
  for (;;) {
    if (!wait_for(POLLOUT, write_deadline_)) return -1;
    const ssize_t n = ::send(connection_.fd, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0 || (errno != EAGAIN && errno != EINTR)) return n;
  }
}

void DeadlineStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  address_of(connection_.fd, true, ip, port);
}

void DeadlineStream::get_local_ip_and_port(std::string& ip, int& port) const {
  address_of(connection_.fd, false, ip, port);
}

void DeadlineStream::keep_unread() {
  connection_.received.erase(0, consumed_);
  consumed_ = 0;
}

}  // namespace gpureap_http_serving
