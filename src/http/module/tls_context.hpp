// The server's TLS context: the certificate chain and key of a web-config, TLS 1.2 and later
// (as Prometheus's exporter-toolkit by default), no compression, no renegotiation.
#pragma once

#include <openssl/ssl.h>

#include <memory>

namespace gpureap_http_serving {

struct TlsContextFree {
  void operator()(SSL_CTX* context) const { SSL_CTX_free(context); }
};
using TlsContext = std::unique_ptr<SSL_CTX, TlsContextFree>;

// Null when the files cannot be read, are not PEM, or the key does not match the certificate.
TlsContext make_server_tls_context(const char* cert_file, const char* key_file);

}  // namespace gpureap_http_serving
