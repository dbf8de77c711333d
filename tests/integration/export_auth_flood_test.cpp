// A flood of distinct wrong passwords (bcrypt cost 10) against `gpureap export`: beyond
// bcrypt's queue it is answered 429 at once, a scraper that authenticated before is answered
// from memory beside it, and a new scraper from another address gets its turn.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "../basic_auth_header.hpp"
#include "../loopback_socket.hpp"
#include "export_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

// GET /metrics with basic auth on a fresh connection from `from`; the fd, or -1.
int send_scrape(int port, const char* from, const std::string& password) {
  const int fd = connect_to(port, from);
  if (fd < 0) return -1;
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: " +
                              basic_auth_header("prometheus:" + password) + "\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// The status of the answer on fd (closed after), or 0 when none came within 60 s.
int answer_status(int fd) {
  std::string text;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  char buffer[4096];
  while (text.find("\r\n") == std::string::npos && std::chrono::steady_clock::now() < give_up) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  close(fd);
  if (text.rfind("HTTP/1.1 ", 0) != 0 || text.size() < 12) return 0;
  return std::stoi(text.substr(9, 3));
}

TEST(ExportAuthFlood, DistinctWrongPasswordsAreTurnedAwayAtOnceWhileScrapersGetThrough) {
  SimHost host;
  const std::string dir = host.config_dir();
  std::ofstream(dir + "/web.yml") << "basic_auth_users:\n  prometheus: " << bcrypt_of("scrape me", 10) << "\n";
  ExportServer server(host, {"--web-config", dir + "/web.yml", "--no-kernel-log"});
  ASSERT_TRUE(server.serving()) << server.stderr_text();
  auto remembered = server.client();
  remembered.set_keep_alive(true);
  remembered.set_read_timeout(60, 0);
  remembered.set_basic_auth("prometheus", "scrape me");
  auto first = remembered.Get("/metrics");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200);

  // 60 distinct wrong passwords at once from 127.0.0.1, each on its own connection.
  std::vector<int> flood;
  for (int i = 0; i < 60; ++i) {
    flood.push_back(send_scrape(server.port(), nullptr, "wrong " + std::to_string(i)));
    ASSERT_GE(flood.back(), 0);
  }
  // Beside it: the scraper that passed before, and a new one from another address.
  const auto again = remembered.Get("/metrics");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  const int newcomer = send_scrape(server.port(), "127.0.0.2", "scrape me");
  ASSERT_GE(newcomer, 0);
  EXPECT_EQ(answer_status(newcomer), 200) << "a new client from another address has its turn";

  int refused = 0, busy = 0;
  for (const int fd : flood) {
    const int status = answer_status(fd);
    EXPECT_TRUE(status == 401 || status == 429) << status;
    refused += status == 401;
    busy += status == 429;
  }
  EXPECT_GT(busy, 0) << "a bounded queue turns the flood away";
  EXPECT_LT(refused, 60);
  const Scrape after = server.scrape({{"Authorization", basic_auth_header("prometheus:scrape me")}});
  EXPECT_EQ(after.value("gpureap_scrapes_rejected_total", {{"reason", "auth-busy"}}), busy);
  EXPECT_EQ(after.value("gpureap_scrapes_rejected_total", {{"reason", "unauthorized"}}), refused);
  EXPECT_EQ(server.stop(), 0) << server.stderr_text();
}

}  // namespace
}  // namespace gpureap::test
