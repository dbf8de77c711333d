// A client connection between requests: its socket, the bytes it has sent that no request
// has consumed yet, and how many requests it has had answered.
#pragma once

#include <cstddef>
#include <string>

namespace gpureap_http_serving {

struct ClientConnection {
  int fd = -1;
  std::string received;        // read by the gate, not yet by a request
  std::size_t answered = 0;    // requests answered on this connection
};

// shutdown() first so that the client sees the end even if a copy of the descriptor lives on.
void close_connection(ClientConnection& connection);

}  // namespace gpureap_http_serving
