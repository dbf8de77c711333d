#include "http/module/tls_context.hpp"

namespace gpureap_http_serving {

TlsContext make_server_tls_context(const char* cert_file, const char* key_file) {
  TlsContext context(SSL_CTX_new(TLS_server_method()));
  if (context == nullptr) return nullptr;
  SSL_CTX* raw = context.get();
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  SSL_CTX_set_options(raw, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // The gate and the workers retry a write with the same buffer after WANT_WRITE; partial
  // writes let a large answer go out as the socket takes it.
  SSL_CTX_set_mode(raw, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(raw, cert_file) != 1 ||
      SSL_CTX_use_PrivateKey_file(raw, key_file, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(raw) != 1) {
    return nullptr;
  }
  return context;
}

}  // namespace gpureap_http_serving
