#include "http/module/waiting_connection.hpp"

#include <sys/socket.h>
#include <unistd.h>

namespace gpureap_http_serving {

void close_connection(ClientConnection& connection) {
  if (connection.tls != nullptr) {
    if (SSL_is_init_finished(connection.tls.get()) != 0) SSL_shutdown(connection.tls.get());
    connection.tls.reset();
  }
  if (connection.fd < 0) return;
  ::shutdown(connection.fd, SHUT_RDWR);
  ::close(connection.fd);
  connection.fd = -1;
}

}  // namespace gpureap_http_serving
