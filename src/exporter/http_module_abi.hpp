// The boundary between gpureap and its HTTP module, gpureap-http.so, which holds cpp-httplib.
//
// Why a module: Debian ships cpp-httplib as a shared library built with OpenSSL, zlib and
// brotli, on the shared libstdc++. Linked into gpureap it would cost every command ~4 ms of
// start-up (5x `gpureap --version`; docs/performance.md) and bring a second libstdc++ beside
// the static one gpureap carries. So only `gpureap export` loads it, with dlopen, and nothing
// but C types crosses this boundary: each side keeps its own C++ runtime.
#pragma once

#include <stddef.h>

#define GPUREAP_HTTP_MODULE_ABI 1
#define GPUREAP_HTTP_MODULE_ENTRY "gpureap_http_module"

extern "C" {

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

struct gpureap_http_module_api {
  unsigned abi;         // GPUREAP_HTTP_MODULE_ABI
  const char* version;  // the gpureap version it was built as
  // A server bound and listening, or NULL with one line saying why in `error`.
  void* (*create)(const struct gpureap_http_server_config* config, int* bound_port, char* error, size_t error_size);
  // Serves until stop(); 0 when stopped, -1 when accepting failed.
  int (*serve)(void* server);
  void (*stop)(void* server);  // from any thread, before or while serve() runs
  void (*destroy)(void* server);
};

// The module's one exported symbol (GPUREAP_HTTP_MODULE_ENTRY).
const struct gpureap_http_module_api* gpureap_http_module(void);

}  // extern "C"
