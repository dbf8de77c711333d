// Where connections wait for their request, so that no worker does: one thread with epoll
// reads what each client sends (under TLS, after a non-blocking handshake, through the
// session) and hands a connection to `ready` only once its request is whole
// (request_head.hpp). A connection that does not complete its handshake and request by its
// deadline is closed; so is the one that has waited longest when `capacity` connections
// wait, so that a burst of idle connections cannot keep out a scraper whose request follows
// at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "http/module/waiting_connection.hpp"

namespace gpureap_http_serving {

class ConnectionGate {
 public:
  using Clock = std::chrono::steady_clock;
  using ReadyFn = std::function<void(ClientConnection)>;

  ConnectionGate(std::size_t capacity, ReadyFn ready);
  ~ConnectionGate();  // stop()
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // From any thread. Closes the connection at once when the gate has stopped.
  void admit(ClientConnection connection, Clock::duration patience);
  // Closes every waiting connection and ends the thread; later admissions are closed.
  void stop();

 private:
  struct Waiting {
    ClientConnection connection;
    Clock::time_point deadline;
    std::uint64_t arrival;  // order of admission: the smallest has waited longest
    std::uint32_t events;   // EPOLLIN, or EPOLLOUT while a TLS handshake or read must write
  };

  void run();
  void take_admitted();
  void wait_on(ClientConnection connection, Clock::time_point deadline);
  void receive(int fd);  // reads, under TLS through the handshake first
  void watch_for(Waiting& waiting, int fd, std::uint32_t wanted);
  void drop(int fd);                  // closes it
  ClientConnection release(int fd);   // stops watching it, leaves it open
  void close_expired();
  int next_timeout_ms() const;

  const std::size_t capacity_;
  const ReadyFn ready_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;

  std::mutex mutex_;  // guards admitted_ and stopped_
  std::vector<std::pair<ClientConnection, Clock::time_point>> admitted_;
  bool stopped_ = false;

  // The gate thread's own.
  std::unordered_map<int, Waiting> waiting_;
  std::set<std::pair<Clock::time_point, int>> by_deadline_;
  std::map<std::uint64_t, int> by_arrival_;
  std::uint64_t next_arrival_ = 0;

  std::thread thread_;
};

}  // namespace gpureap_http_serving
