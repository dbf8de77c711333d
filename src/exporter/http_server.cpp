#include "exporter/http_server.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

constexpr const char* kModuleName = "gpureap-http.so";

std::string executable_dir() {
  std::error_code error;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string() : exe.parent_path().string();
}

// The module's API, loaded once for the process and never unloaded (its threads and its
// C++ runtime must outlive every server).
const gpureap_http_module_api* load_module(const std::string& module_path, std::string& error) {
  std::vector<std::string> candidates = module_path.empty() ? http_module_candidates() : std::vector{module_path};
  std::string tried;
  for (const auto& path : candidates) {
    if (::access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      error = "cannot load the HTTP module " + path + ": " + sanitize_for_terminal(why ? why : "unknown error") +
              " (is libcpp-httplib0.11 installed?)";
      return nullptr;
    }
    using Entry = const gpureap_http_module_api* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, GPUREAP_HTTP_MODULE_ENTRY));
    const gpureap_http_module_api* api = entry ? entry() : nullptr;
    if (api == nullptr || api->abi != GPUREAP_HTTP_MODULE_ABI || std::strcmp(api->version, GPUREAP_VERSION) != 0) {
      error = "the HTTP module " + path + " belongs to another gpureap version (this is " + GPUREAP_VERSION +
              "): reinstall gpureap";
      return nullptr;
    }
    return api;
  }
  error = "the HTTP module " + std::string(kModuleName) + " is not installed (looked for " + tried +
          "): reinstall gpureap";
  return nullptr;
}

}  // namespace

std::vector<std::string> http_module_candidates() {
  std::vector<std::string> out;
  if (const std::string dir = executable_dir(); !dir.empty()) {
    out.push_back(dir + "/" + kModuleName);
    out.push_back(dir + "/../" + GPUREAP_INSTALL_LIBDIR + "/gpureap/" + kModuleName);
  }
  out.push_back(std::string(GPUREAP_INSTALL_FULL_LIBDIR) + "/gpureap/" + kModuleName);
  return out;
}

std::unique_ptr<HttpServer> HttpServer::create(const std::string& module_path, const HttpServerConfig& config,
                                               HttpHandler handler, std::string& error) {
  const gpureap_http_module_api* api = load_module(module_path, error);
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
