#include "http/module/call_watch.hpp"

#include <algorithm>

#include <netinet/in.h>
#include <linux/sockios.h>  // SIOCINQ
#include <linux/tcp.h>      // glibc's tcp_info lacks tcpi_bytes_received
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "http/http_module_abi.hpp"

namespace gpureap_http_module_client {

long long tcp_bytes_received(int fd) {
  if (fd < 0) return -1;
  tcp_info info{};
  socklen_t length = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;
  return static_cast<long long>(info.tcpi_bytes_received);
}

long long tcp_bytes_taken(int fd) {
  // Received first, queued second: bytes that arrive in between only make the figure smaller,
  // so a body that streams in behind a short head is never counted as head.
  const long long received = tcp_bytes_received(fd);
  if (received < 0) return -1;
  int queued = 0;
  if (ioctl(fd, SIOCINQ, &queued) != 0 || queued < 0) return -1;
  return std::max(0LL, received - queued);
}

CallWatch::CallWatch(std::chrono::steady_clock::time_point deadline, std::function<bool()> cancelled,
                     std::function<CallSocket()> socket, std::function<void()> interrupt)
    : deadline_(deadline),
      cancelled_(std::move(cancelled)),
      socket_(std::move(socket)),
      interrupt_(std::move(interrupt)) {
  // A kept-alive socket has received earlier answers: only what comes in this call counts.
  counted_ = socket_();
  baseline_ = std::max(0LL, tcp_bytes_taken(counted_.fd));
  thread_ = std::thread([this] { run(); });
}

CallWatch::~CallWatch() {
  {
    const std::lock_guard lock(mutex_);
    finished_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void CallWatch::run() {
  constexpr auto kPeriod = std::chrono::milliseconds(10);
  std::unique_lock lock(mutex_);
  while (!finished_) {
    CallEnd why = CallEnd::Running;
    if (std::chrono::steady_clock::now() >= deadline_) {
      why = CallEnd::Deadline;
    } else if (cancelled_ && cancelled_()) {
      why = CallEnd::Cancelled;
    } else if (!head_done_.load()) {
      const CallSocket now = socket_();
      if (now.generation != counted_.generation) {
        counted_ = now;
        baseline_ = 0;
      }
      const long long taken = tcp_bytes_taken(now.fd);
      if (taken >= 0 && taken - baseline_ > GPUREAP_HTTP_MAX_HEAD_BYTES + kReaderReadAhead) why = CallEnd::HeadTooLarge;
    }
    if (why != CallEnd::Running) {
      end_.store(why);
      // Again each period until the call returns: a shutdown that came while the socket was
      // being replaced (a reconnection) must not leave the new one unbounded.
      interrupt_();
    }
    wake_.wait_for(lock, kPeriod, [this] { return finished_; });
  }
}

}  // namespace gpureap_http_module_client
