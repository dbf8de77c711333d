// The HTTP client's head cap (src/http/module/call_watch.*) on a real loopback connection: a
// short head with a large body queued behind it is not a head over the cap (CI once failed a
// fleet test that way, when the body streamed in before the client had parsed the head), and
// a head the client really reads past the cap is.
#include "http/module/call_watch.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "../loopback_socket.hpp"
#include "http/http_module_abi.hpp"

namespace {

using gpureap_http_module_client::CallEnd;
using gpureap_http_module_client::CallSocket;
using gpureap_http_module_client::CallWatch;
using namespace std::chrono_literals;

// A connected loopback pair: `client` as the HTTP client's socket, `server` as the peer's.
struct LoopbackPair {
  int client = -1;
  int server = -1;
  LoopbackPair() {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 && listen(listener, 1) == 0 &&
        getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      client = gpureap::test::connect_to(ntohs(address.sin_port));
      server = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    }
    close(listener);
  }
  ~LoopbackPair() {
    if (client >= 0) close(client);
    if (server >= 0) close(server);
  }
};

void send_all(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    sent += static_cast<std::size_t>(n);
  }
}

std::size_t read_exactly(int fd, std::size_t count) {
  std::string buffer(count, '\0');
  std::size_t got = 0;
  while (got < count) {
    const ssize_t n = recv(fd, buffer.data() + got, count - got, 0);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

// A watch over the pair's client socket whose interrupt only counts.
struct Watched {
  LoopbackPair pair;
  int interrupts = 0;
  std::unique_ptr<CallWatch> watch;
  Watched() {
    const int fd = pair.client;
    watch = std::make_unique<CallWatch>(
        std::chrono::steady_clock::now() + 30s, nullptr, [fd] { return CallSocket{fd, 1}; },
        [this] { ++interrupts; });
  }
};

// Enough periods of the watch (10 ms each) for it to have looked many times.
void let_the_watch_look() { std::this_thread::sleep_for(150ms); }

TEST(HttpCallWatch, ABodyQueuedBehindAShortHeadIsNotCountedAsHead) {
  Watched call;
  ASSERT_GE(call.pair.client, 0);
  // A fast server: head and 1 MiB of body sent before the client has read a byte.
  send_all(call.pair.server, "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n" + std::string(1 << 20, '['));
  let_the_watch_look();
  EXPECT_EQ(call.watch->end(), CallEnd::Running);
  // The client reads its head (a few dozen bytes, and a buffer of read-ahead) and says so.
  EXPECT_EQ(read_exactly(call.pair.client, 4096), 4096u);
  call.watch->head_done();
  EXPECT_EQ(read_exactly(call.pair.client, 512 * 1024), 512u * 1024);
  let_the_watch_look();
  EXPECT_EQ(call.watch->end(), CallEnd::Running);
  EXPECT_EQ(call.interrupts, 0);
}

TEST(HttpCallWatch, AHeadTheClientReadsPastTheCapEndsTheCall) {
  Watched call;
  ASSERT_GE(call.pair.client, 0);
  const std::size_t past_cap = GPUREAP_HTTP_MAX_HEAD_BYTES + gpureap_http_module_client::kReaderReadAhead + 4096;
  send_all(call.pair.server, "HTTP/1.1 200 OK\r\n" + std::string(past_cap, 'x'));
  // Up to the cap and its read-ahead allowance the head may still end.
  EXPECT_EQ(read_exactly(call.pair.client, GPUREAP_HTTP_MAX_HEAD_BYTES), std::size_t{GPUREAP_HTTP_MAX_HEAD_BYTES});
  let_the_watch_look();
  EXPECT_EQ(call.watch->end(), CallEnd::Running);
  // Past it, without the head having ended, the watch shuts the call.
  EXPECT_GT(read_exactly(call.pair.client, past_cap - GPUREAP_HTTP_MAX_HEAD_BYTES), 0u);
  let_the_watch_look();
  EXPECT_EQ(call.watch->end(), CallEnd::HeadTooLarge);
  EXPECT_GE(call.interrupts, 1);
}

}  // namespace
