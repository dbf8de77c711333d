// watch against webhook servers that try to wear it down: one that sends header lines without
// end, one that drips its answer a byte at a time. The daemon's memory (its peak RSS), the
// outcome logged, and how soon SIGTERM ends it are what a node's operator would see.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "watch_support.hpp"

namespace gpureap::test {
namespace {

enum class Hostility { EndlessHeaders, Dripper };

// Answers every connection "HTTP/1.1 200 OK" and then, as told, header lines as fast as the
// client takes them, or one byte each half second (inside any per-read timeout).
class HostileWebhook {
 public:
  explicit HostileWebhook(Hostility how) : how_(how) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener_, 8) != 0) {
      throw std::runtime_error("bind");
    }
    socklen_t length = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~HostileWebhook() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }
  bool answering() const { return answering_; }

 private:
  bool wait_readable(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, ms) == 1;
  }

  void serve() {
    while (!stop_) {
      if (!wait_readable(listener_, 50)) continue;
      const int peer = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (peer < 0) continue;
      char request[4096];
      if (wait_readable(peer, 2000)) (void)!read(peer, request, sizeof request);
      const std::string status = "HTTP/1.1 200 OK\r\n";
      bool open = send(peer, status.data(), status.size(), MSG_NOSIGNAL) > 0;
      answering_ = true;
      const std::string line = "X-Filler: " + std::string(1000, 'a') + "\r\n";
      while (open && !stop_) {
        if (how_ == Hostility::EndlessHeaders) {
          pollfd p{peer, POLLOUT, 0};
          if (poll(&p, 1, 50) == 1) open = send(peer, line.data(), line.size(), MSG_NOSIGNAL) > 0;
        } else {
          for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
          open = send(peer, "X", 1, MSG_NOSIGNAL) > 0;
        }
      }
      close(peer);
    }
  }

  const Hostility how_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> answering_{false};
  std::thread thread_;
};

long status_kib(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long value = -1;
  while (status >> key) {
    if (key == field) {
      status >> value;
      return value;
    }
  }
  return -1;
}

long peak_rss_kib(pid_t pid) { return status_kib(pid, "VmHWM:"); }

// The daemon's bound, 64 MiB, holds for a release build; ASan's shadow memory and quarantine
// alone take more, so there the growth from a quiet daemon is what is bounded.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUREAP_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define GPUREAP_TEST_ASAN 1
#endif

void expect_small(pid_t pid, long quiet_kib) {
  const long peak = peak_rss_kib(pid);
  ASSERT_GT(peak, 0);
  EXPECT_LT(peak - quiet_kib, 16 * 1024) << "watch grew (KiB) from " << quiet_kib;
#ifndef GPUREAP_TEST_ASAN
  EXPECT_LT(peak, 64 * 1024) << "watch's peak RSS in KiB";
#endif
}

std::string policy_for(const SimHost& host, int port, const std::string& timeout) {
  return write_file(host, "policy.toml",
                    std::string(kFast) + "[notify]\nwebhook = \"http://127.0.0.1:" + std::to_string(port) +
                        "/hook\"\nwebhook_timeout = \"" + timeout + "\"\n" +
                        "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"100ms\"\naction = \"notify\"\n");
}

// Stops the daemon and returns how long it took to exit.
std::chrono::milliseconds stop_time(BackgroundWatch& watch) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(watch.stop(SIGTERM, 10000), 0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
}

TEST(WatchHostileWebhook, HeadersWithoutEndAreCutAt64KiBAndTheDaemonStaysSmall) {
  SimHost host;
  auto old = host.start({"--alloc", "0:1GiB"});
  HostileWebhook webhook(Hostility::EndlessHeaders);
  // A timeout long enough that the head's cap, not the deadline, must end the call.
  BackgroundWatch watch(host, policy_for(host, webhook.port(), "20s"));
  ASSERT_TRUE(eventually([&] { return webhook.answering(); }, 8000));
  const long quiet = status_kib(watch.pid(), "VmRSS:");
  const auto failed = watch.wait_for("notification", {{"channel", "webhook"}}, 8000);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->field("outcome"), "failed") << failed->raw;
  EXPECT_NE(failed->field("detail").find("passed 64 KiB"), std::string::npos) << failed->raw;
  expect_small(watch.pid(), quiet);
  EXPECT_LT(stop_time(watch).count(), 2000);
  EXPECT_TRUE(running(old.pid));
}

TEST(WatchHostileWebhook, ADripperIsCutAtTheWebhookTimeoutAndTheLooksGoOn) {
  SimHost host;
  auto old = host.start({"--alloc", "0:1GiB"});
  HostileWebhook webhook(Hostility::Dripper);
  BackgroundWatch watch(host, policy_for(host, webhook.port(), "1s"));
  ASSERT_TRUE(eventually([&] { return webhook.answering(); }, 8000));
  const long quiet = status_kib(watch.pid(), "VmRSS:");
  const auto timed_out = watch.wait_for("notification", {{"channel", "webhook"}}, 6000);
  ASSERT_TRUE(timed_out);
  EXPECT_EQ(timed_out->field("outcome"), "timeout") << timed_out->raw;
  EXPECT_NE(timed_out->field("detail").find("within the timeout"), std::string::npos) << timed_out->raw;
  EXPECT_TRUE(watch.wait_for("scan"));
  expect_small(watch.pid(), quiet);
  EXPECT_LT(stop_time(watch).count(), 2000);
}

TEST(WatchHostileWebhook, SigtermEndsTheDaemonWithinTwoSecondsWhileAWebhookDrips) {
  SimHost host;
  auto old = host.start({"--alloc", "0:1GiB"});
  HostileWebhook webhook(Hostility::Dripper);
  BackgroundWatch watch(host, policy_for(host, webhook.port(), "60s"));
  ASSERT_TRUE(eventually([&] { return webhook.answering(); }, 8000)) << "the notification never reached the webhook";
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // a drip or two into the answer
  EXPECT_LT(stop_time(watch).count(), 2000);
  bool cut_off = false;
  for (const auto& line : watch.lines()) {
    cut_off |= line.event == "notification" && line.field("detail").find("gpureap watch is stopping") != std::string::npos;
  }
  EXPECT_TRUE(cut_off) << "the delivery cut off at the stop is logged";
  EXPECT_TRUE(running(old.pid));
}

}  // namespace
}  // namespace gpureap::test
