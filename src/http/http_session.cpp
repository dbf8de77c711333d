#include "http/http_session.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>


namespace gpureap {
namespace {

constexpr const char* kPluginRelativePath = "/../lib/gpureap/gpureap-http.so";

struct Plugin {
  gpureap_http_open_fn open = nullptr;
  gpureap_http_get_fn get = nullptr;
  gpureap_http_close_fn close = nullptr;
  std::string error;  // why it could not be loaded
};

// Loaded once and never unloaded: OpenSSL and libstdc++ keep state past any dlclose.
const Plugin& plugin() {
  static const Plugin loaded = [] {
    Plugin p;
    const std::string path = http_plugin_path();
    if (path.empty()) {
      p.error = "the program's own path is unknown (/proc not mounted?)";
      return p;
    }
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = ::dlerror();
      p.error = error != nullptr ? error : ("cannot load " + path);
      return p;
    }
    p.open = reinterpret_cast<gpureap_http_open_fn>(::dlsym(handle, kGpureapHttpOpenSymbol));
    p.get = reinterpret_cast<gpureap_http_get_fn>(::dlsym(handle, kGpureapHttpGetSymbol));
    p.close = reinterpret_cast<gpureap_http_close_fn>(::dlsym(handle, kGpureapHttpCloseSymbol));
    if (p.open == nullptr || p.get == nullptr || p.close == nullptr) {
      p = Plugin{};
      p.error = path + " lacks the gpureap_http_* entry points: another version of gpureap?";
    }
    return p;
  }();
  return loaded;
}


int status_trampoline(void* context, int status, const char* location) {
  const auto* request = static_cast<const HttpGet*>(context);
  return request->on_status(status, location != nullptr ? location : "") ? 1 : 0;
}

int body_trampoline(void* context, const char* data, std::size_t length) {
  const auto* request = static_cast<const HttpGet*>(context);
  return request->on_body(std::string_view(data, length)) ? 1 : 0;
}

}  // namespace

std::string http_plugin_path() {
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return {};
  std::string path(exe, static_cast<std::size_t>(n));
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {};
  return path.substr(0, slash) + kPluginRelativePath;
}

std::unique_ptr<HttpSession> HttpSession::open(const HttpSessionConfig& config, std::string& why) {
  const Plugin& p = plugin();
  if (p.open == nullptr) {
    why = "gpureap's HTTP plug-in could not be loaded (" + p.error + "); is gpureap fully installed?";
    return nullptr;
  }
  const gpureap_http_config c{kGpureapHttpAbiVersion,
                              config.https ? 1 : 0,
                              config.host.c_str(),
                              config.port,
                              config.basic_auth ? config.user.c_str() : nullptr,
                              config.basic_auth ? config.password.c_str() : nullptr,
                              config.ca_file.c_str(),
                              config.verify_certificate ? 1 : 0};
  gpureap_http_session* session = p.open(&c);
  if (session == nullptr) {
    why = "gpureap's HTTP plug-in refused the connection settings (another version of gpureap?)";
    return nullptr;
  }
  std::unique_ptr<HttpSession> wrapped(new HttpSession());
  wrapped->session_ = session;
  return wrapped;
}

HttpSession::~HttpSession() {
  if (session_ != nullptr) plugin().close(session_);
}

gpureap_http_error HttpSession::get(const HttpGet& request) {
  std::vector<const char*> params;
  params.reserve(request.params.size() * 2);
  for (const auto& [name, value] : request.params) {
    params.push_back(name.c_str());
    params.push_back(value.c_str());
  }
  const gpureap_http_request r{request.path.c_str(), params.data(),    request.params.size(), request.timeout_us,
                               const_cast<HttpGet*>(&request), &status_trampoline, &body_trampoline};
  return static_cast<gpureap_http_error>(plugin().get(session_, &r));
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
  }
  return "the request failed";
}

}  // namespace gpureap
