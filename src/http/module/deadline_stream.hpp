// The httplib::Stream a request is handled through: the bytes the gate already read first,
// then the socket (through its TLS session when it has one), every read and write bounded by
// a deadline for the whole request rather than per call (a client trickling a byte per second
// cannot hold a worker for long). Debian's split httplib.h does not declare its own
// SocketStream, hence this one.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>

#include <httplib.h>

#include "http/module/waiting_connection.hpp"

namespace gpureap_http_serving {

class DeadlineStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;
  // Reading must end by read_deadline; writing, within io_timeout of the first write.
  DeadlineStream(ClientConnection& connection, Clock::time_point read_deadline, Clock::duration io_timeout);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return connection_.fd; }

  // Leaves in the connection only the bytes no request read (a pipelined next request).
  void keep_unread();

 private:
  bool wait_for(short events, Clock::time_point deadline) const;
  // SSL_read or SSL_write (which may each need the socket to read or to write) until deadline.
  ssize_t through_tls(char* read_into, const char* write_from, std::size_t size, Clock::time_point deadline);

  ClientConnection& connection_;
  std::size_t consumed_ = 0;  // of connection_.received
  Clock::time_point read_deadline_;
  Clock::duration io_timeout_;
  Clock::time_point write_deadline_{};
  bool writing_ = false;
};

}  // namespace gpureap_http_serving
