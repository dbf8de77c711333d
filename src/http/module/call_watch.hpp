// The absolute deadline and the head cap of one client call, kept by a thread beside it:
// httplib's own timeouts bound each wait, so a server that drips a byte per wait, or sends
// header lines without end, would hold the call (and grow it) for ever. Every 10 ms the watch
// looks at the clock, the caller's cancel flag and the bytes the client has taken from the
// kernel before the body began; when one is over, it shuts the connection down, which ends every blocked
// read and write of the call at once. Inside the module only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace gpureap_http_module_client {

enum class CallEnd { Running, Deadline, HeadTooLarge, Cancelled };

// The call's socket: its descriptor (-1: none yet) and how many the client has made, so that a
// reconnection on a reused descriptor number is seen.
struct CallSocket {
  int fd = -1;
  unsigned generation = 0;
};

class CallWatch {
 public:
  // `socket` gives the call's socket now; `interrupt` shuts it down.
  CallWatch(std::chrono::steady_clock::time_point deadline, std::function<bool()> cancelled,
            std::function<CallSocket()> socket, std::function<void()> interrupt);
  ~CallWatch();  // ends the watch (joins its thread)
  CallWatch(const CallWatch&) = delete;
  CallWatch& operator=(const CallWatch&) = delete;

  void head_done() { head_done_.store(true); }
  // Why the watch shut the connection, or Running when it did not.
  CallEnd end() const { return end_.load(); }

 private:
  void run();

  const std::chrono::steady_clock::time_point deadline_;
  const std::function<bool()> cancelled_;
  const std::function<CallSocket()> socket_;
  CallSocket counted_;
  long long baseline_ = 0;
  const std::function<void()> interrupt_;
  std::atomic<bool> head_done_{false};
  std::atomic<CallEnd> end_{CallEnd::Running};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool finished_ = false;
  std::thread thread_;
};

// The bytes the kernel has received on a TCP socket (TLS records included), or -1.
long long tcp_bytes_received(int fd);

// Of those, the bytes the reader has taken out of the socket (received less still queued), or
// -1. Received alone is no measure of the head: a fast server's body is already queued behind
// it before the client has parsed the last header line.
long long tcp_bytes_taken(int fd);

// How far the reader may have taken past the head before it says the head is done: httplib's
// 4 KiB socket buffer, its 4 KiB first body read (a POST's head is known at its first body
// chunk) and one TLS record that OpenSSL decrypted whole (16 KiB and its overhead). The cap
// is only called passed when the bytes taken exceed the head cap by more than this, so the
// head itself is certainly over it.
inline constexpr long long kReaderReadAhead = 32 * 1024;

}  // namespace gpureap_http_module_client
