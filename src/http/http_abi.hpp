// The C interface of gpureap's HTTP plug-in (lib/gpureap/gpureap-http.so, built from
// plugin/http_plugin.cpp over cpp-httplib). It is a plug-in, loaded only by the commands that
// speak HTTP, because linking cpp-httplib into the program costs every start of gpureap ~4 ms
// (its dynamic relocations, libssl's, libcrypto's and libstdc++'s, and OpenSSL's initialisation:
// docs/performance.md), five times what `ps` and `kill` start in today.
//
// Only C types cross it: the program links libstdc++ statically, the plug-in uses the shared one.
#pragma once

#include <cstddef>

extern "C" {

inline constexpr int kGpureapHttpAbiVersion = 1;

struct gpureap_http_config {
  int abi_version;           // kGpureapHttpAbiVersion
  int https;                 // 0: http, 1: https
  const char* host;          // a name or an address (IPv6 without brackets)
  int port;
  const char* basic_user;    // nullptr: no basic authentication
  const char* basic_password;
  const char* ca_file;       // https: nullptr or "" for the system's CAs
  int verify_certificate;    // https: 0 only when the user asked (--insecure)
};

// What went wrong when no response came back.
enum gpureap_http_error {
  GPUREAP_HTTP_OK = 0,
  GPUREAP_HTTP_CONNECTION = 1,         // refused, unreachable, the name does not resolve
  GPUREAP_HTTP_CONNECTION_TIMEOUT = 2,
  GPUREAP_HTTP_READ = 3,               // the connection broke or timed out while reading
  GPUREAP_HTTP_WRITE = 4,
  GPUREAP_HTTP_TLS_HANDSHAKE = 5,
  GPUREAP_HTTP_TLS_CA_FILE = 6,        // the CA file could not be loaded
  GPUREAP_HTTP_TLS_UNTRUSTED = 7,      // the server's certificate was not verified
  GPUREAP_HTTP_COMPRESSION = 8,
  GPUREAP_HTTP_CANCELED = 9,           // a callback returned 0
  GPUREAP_HTTP_OTHER = 10,
  GPUREAP_HTTP_OUT_OF_MEMORY = 11,     // the answer outgrew the memory the process may use
};

struct gpureap_http_request {
  const char* path;              // "/api/v1/query"
  const char* const* params;     // name, value, name, value, ...: URL-encoded by the plug-in
  std::size_t param_count;       // pairs
  long long timeout_us;          // for each wait: connecting, every read and write
  void* context;
  // The status and the Location header (or ""), before the body; 0 stops the transfer.
  int (*on_status)(void* context, int status, const char* location);
  // Each piece of the body as it arrives, decompressed; 0 stops the transfer.
  int (*on_body)(void* context, const char* data, std::size_t length);
};

struct gpureap_http_session;

// The plug-in's three entry points, found with dlsym under these names.
using gpureap_http_open_fn = gpureap_http_session* (*)(const gpureap_http_config* config);
using gpureap_http_get_fn = int (*)(gpureap_http_session* session, const gpureap_http_request* request);
using gpureap_http_close_fn = void (*)(gpureap_http_session* session);
inline constexpr const char* kGpureapHttpOpenSymbol = "gpureap_http_open";
inline constexpr const char* kGpureapHttpGetSymbol = "gpureap_http_get";
inline constexpr const char* kGpureapHttpCloseSymbol = "gpureap_http_close";

}  // extern "C"
