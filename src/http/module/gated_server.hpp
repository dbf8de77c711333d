// httplib::Server with its connections kept off the workers until their request is whole.
// httplib 0.11.4 hands each accepted socket to a worker that waits up to the keep-alive
// timeout for a request and then reads it with a timeout per recv(): 40 connections that
// never sent anything delayed a scrape by 4 s, 1,000 made every scrape time out. Here
// httplib's worker only passes the socket to a ConnectionGate and returns; a pool of our own
// handles the requests the gate finds whole, then gives kept-alive connections back to it.
// Under TLS the gate does the handshake too, so a client that never finishes one holds no
// worker either; httplib's SSLServer, which shakes hands on its worker, is not used.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>

#include <httplib.h>

#include "http/module/connection_gate.hpp"
#include "http/module/tls_context.hpp"

namespace gpureap_http_serving {

class GatedServer final : public httplib::Server {
 public:
  // workers: requests handled at once; io_timeout: for a new connection's request to arrive,
  // and for reading it and writing its response; tls: null for plain HTTP.
  GatedServer(unsigned workers, std::chrono::milliseconds io_timeout, TlsContext tls);
  ~GatedServer() override;  // stop_gate()

  // After the accept loop has ended: closes the waiting connections, ends the workers.
  void stop_gate();

 private:
  // Overrides httplib's private virtual, which would process the connection on its worker.
  bool process_and_close_socket(socket_t sock) override;
  void handle(ClientConnection connection);

  const std::chrono::milliseconds io_timeout_;
  const TlsContext tls_;
  std::atomic<bool> stopping_{false};
  // The gate first: should the pool fail to start, the gate's destructor ends its thread (a
  // ThreadPool destroyed without shutdown() would terminate the process).
  std::unique_ptr<ConnectionGate> gate_;
  std::unique_ptr<httplib::ThreadPool> workers_;
};

}  // namespace gpureap_http_serving
