// A client connection between requests: its socket, its TLS session (none for plain HTTP),
// the bytes it has sent that no request has consumed yet, and how many requests it has had
// answered.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <memory>
#include <string>

namespace gpureap_http_serving {

struct TlsSessionFree {
  void operator()(SSL* session) const { SSL_free(session); }
};
using TlsSession = std::unique_ptr<SSL, TlsSessionFree>;

struct ClientConnection {
  int fd = -1;
  std::string received;        // read by the gate (decrypted under TLS), not yet by a request
  std::size_t answered = 0;    // requests answered on this connection
  TlsSession tls;              // over a non-blocking socket; null for plain HTTP
};

// shutdown() first so that the client sees the end even if a copy of the descriptor lives on.
// Under TLS, a close_notify first if the socket takes it at once.
void close_connection(ClientConnection& connection);

}  // namespace gpureap_http_serving
