#include "http/http_client.hpp"

namespace gpureap {
namespace {

template <typename Request>
int status_trampoline(void* context, int status, const char* location) {
  const auto* request = static_cast<const Request*>(context);
  return request->on_status(status, location != nullptr ? location : "") ? 1 : 0;
}

template <typename Request>
int body_trampoline(void* context, const char* data, std::size_t length) {
  const auto* request = static_cast<const Request*>(context);
  return request->on_body(std::string_view(data, length)) ? 1 : 0;
}

template <typename Request>
int cancelled_trampoline(void* context) {
  const auto* request = static_cast<const Request*>(context);
  return request->cancelled() ? 1 : 0;
}

template <typename Request>
auto cancelled_of(const Request& request) -> int (*)(void*) {
  return request.cancelled ? &cancelled_trampoline<Request> : nullptr;
}

}  // namespace

std::unique_ptr<HttpClient> HttpClient::open(const HttpClientConfig& config, std::string& error) {
  const gpureap_http_module_api* api = load_http_module("", error);
  if (api == nullptr) return nullptr;
  std::optional<CaFileCopy> ca_copy;
  if (!config.ca_file.empty()) {
    ca_copy = CaFileCopy::make(config.ca_file, error);
    if (!ca_copy) return nullptr;
  }
  const std::string ca_file = ca_copy ? ca_copy->path() : "";
  const gpureap_http_client_config c{config.https ? 1 : 0,
                                     config.host.c_str(),
                                     config.port,
                                     config.basic_auth ? config.user.c_str() : nullptr,
                                     config.basic_auth ? config.password.c_str() : nullptr,
                                     ca_file.c_str(),
                                     config.verify_certificate ? 1 : 0};
  void* client = api->client_open(&c);
  if (client == nullptr) {
    error = "the HTTP module refused the connection settings";
    return nullptr;
  }
  std::unique_ptr<HttpClient> wrapped(new HttpClient());
  wrapped->api_ = api;
  wrapped->client_ = client;
  wrapped->ca_copy_ = std::move(ca_copy);
  return wrapped;
}

HttpClient::~HttpClient() {
  if (client_ != nullptr) api_->client_close(client_);
}

gpureap_http_error HttpClient::get(const HttpGet& request) {
  std::vector<const char*> params;
  params.reserve(request.params.size() * 2);
  for (const auto& [name, value] : request.params) {
    params.push_back(name.c_str());
    params.push_back(value.c_str());
  }
  const gpureap_http_get r{request.path.c_str(),
                           params.data(),
                           request.params.size(),
                           request.timeout_us,
                           const_cast<HttpGet*>(&request),
                           cancelled_of(request),
                           &status_trampoline<HttpGet>,
                           &body_trampoline<HttpGet>};
  return static_cast<gpureap_http_error>(api_->client_get(client_, &r));
}

gpureap_http_error HttpClient::post(const HttpPost& request) {
  const gpureap_http_post r{request.path.c_str(),
                            request.content_type.c_str(),
                            request.body.data(),
                            request.body.size(),
                            request.timeout_us,
                            const_cast<HttpPost*>(&request),
                            cancelled_of(request),
                            &status_trampoline<HttpPost>,
                            &body_trampoline<HttpPost>};
  return static_cast<gpureap_http_error>(api_->client_post(client_, &r));
}

std::string http_error_text(gpureap_http_error error) {
  switch (error) {
    case GPUREAP_HTTP_OK: return "no error";
    case GPUREAP_HTTP_CONNECTION: return "the connection failed (refused, no route, or the name does not resolve)";
    case GPUREAP_HTTP_CONNECTION_TIMEOUT: return "the connection was not accepted in time";
    case GPUREAP_HTTP_READ: return "the connection broke or went silent while reading the answer";
    case GPUREAP_HTTP_WRITE: return "the connection broke while sending the query";
    case GPUREAP_HTTP_TLS_HANDSHAKE: return "the TLS handshake failed (is it https? the right port?)";
    case GPUREAP_HTTP_TLS_CA_FILE: return "the CA certificates could not be loaded (--ca-file)";
    case GPUREAP_HTTP_TLS_UNTRUSTED:
      return "the server's certificate was not trusted (give its CA with --ca-file, or --insecure)";
    case GPUREAP_HTTP_COMPRESSION: return "the answer's compression was corrupt";
    case GPUREAP_HTTP_CANCELED: return "the transfer was stopped";
    case GPUREAP_HTTP_OTHER: return "the request failed";
    case GPUREAP_HTTP_OUT_OF_MEMORY: return "the answer's headers did not end before the memory limit";
    case GPUREAP_HTTP_DEADLINE: return "no whole answer within the timeout (the connection was closed)";
    case GPUREAP_HTTP_HEAD_TOO_LARGE:
      return "the answer's status line and headers passed 64 KiB (the connection was closed)";
  }
  return "the request failed";
}

}  // namespace gpureap
