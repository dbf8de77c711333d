// The boundary between gpureap and its HTTP module, gpureap-http.so, which holds cpp-httplib:
// the server of `gpureap export` and `watch --listen`, the client of `gpureap fleet` and of
// watch's webhook.
//
// Why a module: Debian ships cpp-httplib as a shared library built with OpenSSL, zlib and
// brotli, on the shared libstdc++. Linked into gpureap it would lengthen every command's
// start-up (docs/performance.md) and bring a second libstdc++ beside
// the static one gpureap carries. So only `export` and `fleet` load it, with dlopen, and
// nothing but C types crosses this boundary: each side keeps its own C++ runtime.
#pragma once

#include <stddef.h>

#define GPUREAP_HTTP_MODULE_ABI 4
#define GPUREAP_HTTP_MODULE_ENTRY "gpureap_http_module"

extern "C" {

// ---- The server (export) ----

struct gpureap_http_header {
  const char* name;
  const char* value;
};

struct gpureap_http_request {
  const char* method;
  const char* path;  // without the query string
  const char* remote_addr;
  // A request header's value ("" when absent; names compare without case); valid during the call.
  const char* (*header)(const struct gpureap_http_request* request, const char* name);
  const void* impl;
};

// The handler answers through this exactly once, before it returns; the module copies
// everything it is given.
typedef void (*gpureap_http_respond_fn)(void* response, int status, const char* content_type, const char* body,
                                        size_t body_size, const struct gpureap_http_header* headers,
                                        size_t header_count);
// Called on the module's worker threads, several at once. Must not throw.
typedef void (*gpureap_http_handler_fn)(void* context, const struct gpureap_http_request* request, void* response,
                                        gpureap_http_respond_fn respond);

struct gpureap_http_server_config {
  const char* host;       // a numeric IPv4 or IPv6 address
  int port;               // 0: a free port, chosen by the kernel
  const char* cert_file;  // PEM; NULL (with key_file) for plain HTTP
  const char* key_file;
  unsigned worker_threads;  // requests handled at once; more wait for a worker
  unsigned io_timeout_ms;   // to read a request and to write a response
  gpureap_http_handler_fn handler;
  void* context;
};

// ---- The client (fleet, watch's webhook) ----

struct gpureap_http_client_config {
  int https;                  // 0: http, 1: https
  const char* host;           // a name or an address (IPv6 without brackets)
  int port;
  const char* basic_user;     // NULL: no basic authentication
  const char* basic_password;
  const char* ca_file;        // https: NULL or "" for the system's CAs
  int verify_certificate;     // https: 0 only when the user asked (fleet --insecure)
};

// Why no response came back.
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
  GPUREAP_HTTP_DEADLINE = 12,          // the whole call outlasted timeout_us: the connection was shut
  GPUREAP_HTTP_HEAD_TOO_LARGE = 13,    // more than GPUREAP_HTTP_MAX_HEAD_BYTES came before the body
};

// What a server may send before its answer's body (status line and headers): past it the
// connection is shut. httplib bounds each header line, not their number.
#define GPUREAP_HTTP_MAX_HEAD_BYTES (64 * 1024)

struct gpureap_http_get {
  const char* path;              // "/api/v1/query"
  const char* const* params;     // name, value, name, value, ...: URL-encoded by the module
  size_t param_count;            // pairs
  long long timeout_us;          // the whole call: at its end a timer shuts the connection down
  void* context;
  // Polled from another thread while the call runs; non-zero shuts the connection (CANCELED).
  // NULL: never cancelled.
  int (*cancelled)(void* context);
  // The status and the Location header (or ""), before the body; 0 stops the transfer.
  int (*on_status)(void* context, int status, const char* location);
  // Each piece of the body as it arrives, decompressed; 0 stops the transfer.
  int (*on_body)(void* context, const char* data, size_t length);
};

// A POST of one body (watch's webhook): the answer's body goes to on_body as it arrives, and
// its status to on_status once the answer is complete (on_status's return value is ignored).
struct gpureap_http_post {
  const char* path;  // with its query, as given
  const char* content_type;
  const char* body;
  size_t body_size;
  long long timeout_us;  // the whole call: at its end a timer shuts the connection down
  void* context;
  int (*cancelled)(void* context);  // as in gpureap_http_get
  int (*on_status)(void* context, int status, const char* location);
  int (*on_body)(void* context, const char* data, size_t length);
};

struct gpureap_http_module_api {
  unsigned abi;         // GPUREAP_HTTP_MODULE_ABI
  const char* version;  // the gpureap version it was built as
  // A server bound and listening, or NULL with one line saying why in `error`.
  void* (*create)(const struct gpureap_http_server_config* config, int* bound_port, char* error, size_t error_size);
  // Serves until stop(); 0 when stopped, -1 when accepting failed.
  int (*serve)(void* server);
  void (*stop)(void* server);  // from any thread, before or while serve() runs
  void (*destroy)(void* server);
  // A client of one server (one kept-alive connection), or NULL when the module refuses it.
  void* (*client_open)(const struct gpureap_http_client_config* config);
  // A GET; GPUREAP_HTTP_OK when a response came back (its status went to on_status).
  int (*client_get)(void* client, const struct gpureap_http_get* request);
  void (*client_close)(void* client);
  // A POST; GPUREAP_HTTP_OK when a response came back (its status went to on_status).
  int (*client_post)(void* client, const struct gpureap_http_post* request);
};

// The module's one exported symbol (GPUREAP_HTTP_MODULE_ENTRY).
const struct gpureap_http_module_api* gpureap_http_module(void);

}  // extern "C"
