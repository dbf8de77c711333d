#include "exporter/http_server.hpp"

#include "text/sanitize.hpp"

namespace gpureap {

std::unique_ptr<HttpServer> HttpServer::create(const std::string& module_path, const HttpServerConfig& config,
                                               HttpHandler handler, std::string& error) {
  const gpureap_http_module_api* api = load_http_module(module_path, error);
  if (api == nullptr) return nullptr;
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->api_ = api;
  server->handler_ = std::move(handler);
  const bool tls = !config.cert_file.empty();
  const gpureap_http_server_config c{config.host.c_str(),
                                     config.port,
                                     tls ? config.cert_file.c_str() : nullptr,
                                     tls ? config.key_file.c_str() : nullptr,
                                     config.worker_threads,
                                     config.io_timeout_ms,
                                     &HttpServer::dispatch,
                                     server.get()};
  char why[512] = {};
  server->server_ = api->create(&c, &server->port_, why, sizeof(why));
  if (server->server_ == nullptr) {
    error = sanitize_for_terminal(why);
    return nullptr;
  }
  return server;
}

HttpServer::~HttpServer() {
  if (server_ != nullptr) {
    api_->stop(server_);
    api_->destroy(server_);
  }
}

bool HttpServer::serve() { return api_->serve(server_) == 0; }

void HttpServer::stop() { api_->stop(server_); }

void HttpServer::dispatch(void* context, const gpureap_http_request* request, void* response,
                          gpureap_http_respond_fn respond) {
  auto* self = static_cast<HttpServer*>(context);
  HttpReply reply;
  try {
    const HttpRequestView view{request->method, request->path, request->remote_addr,
                               [request](const char* name) { return std::string_view(request->header(request, name)); }};
    reply = self->handler_(view);
  } catch (...) {
    reply = HttpReply{500, "text/plain; charset=utf-8", "internal error\n", {}};
  }
  std::vector<gpureap_http_header> headers;
  headers.reserve(reply.headers.size());
  for (const auto& [name, value] : reply.headers) headers.push_back({name.c_str(), value.c_str()});
  respond(response, reply.status, reply.content_type.c_str(), reply.body.data(), reply.body.size(), headers.data(),
          headers.size());
}

}  // namespace gpureap
