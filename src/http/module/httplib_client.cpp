// The client half of gpureap-http.so: cpp-httplib's client behind the C boundary of
// http/http_module_abi.hpp, for `gpureap fleet`. Exceptions never cross it.
#include "http/module/httplib_client.hpp"

#include <httplib.h>

#include <memory>
#include <new>
#include <string>

namespace gpureap_http_module_client {
namespace {

int error_code(httplib::Error error) {
  switch (error) {
    case httplib::Error::Success: return GPUREAP_HTTP_OK;
    case httplib::Error::Connection: return GPUREAP_HTTP_CONNECTION;
    case httplib::Error::ConnectionTimeout: return GPUREAP_HTTP_CONNECTION_TIMEOUT;
    case httplib::Error::Read: return GPUREAP_HTTP_READ;
    case httplib::Error::Write: return GPUREAP_HTTP_WRITE;
    case httplib::Error::SSLConnection: return GPUREAP_HTTP_TLS_HANDSHAKE;
    case httplib::Error::SSLLoadingCerts: return GPUREAP_HTTP_TLS_CA_FILE;
    case httplib::Error::SSLServerVerification: return GPUREAP_HTTP_TLS_UNTRUSTED;
    case httplib::Error::Compression: return GPUREAP_HTTP_COMPRESSION;
    case httplib::Error::Canceled: return GPUREAP_HTTP_CANCELED;
    default: return GPUREAP_HTTP_OTHER;
  }
}

void set_timeouts(httplib::ClientImpl& client, long long timeout_us) {
  const time_t seconds = static_cast<time_t>(timeout_us / 1000000);
  const time_t micros = static_cast<time_t>(timeout_us % 1000000);
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  client.set_write_timeout(seconds, micros);
}

}  // namespace

void* open(const gpureap_http_client_config* config) {
  try {
    std::unique_ptr<httplib::ClientImpl> client;
    if (config->https) {
      auto https = std::make_unique<httplib::SSLClient>(config->host, config->port);
      https->enable_server_certificate_verification(config->verify_certificate != 0);
      if (config->ca_file != nullptr && *config->ca_file != '\0') https->set_ca_cert_path(config->ca_file);
      client = std::move(https);
    } else {
      client = std::make_unique<httplib::ClientImpl>(config->host, config->port);
    }
    client->set_keep_alive(true);
    client->set_tcp_nodelay(true);  // a request's headers and body are separate writes (see the server)
    client->set_follow_location(false);  // a redirect is reported, never followed
    if (config->basic_user != nullptr) {
      client->set_basic_auth(config->basic_user, config->basic_password ? config->basic_password : "");
    }
    return client.release();
  } catch (...) {
    return nullptr;
  }
}


int get(void* handle, const gpureap_http_get* request) {
  auto* client = static_cast<httplib::ClientImpl*>(handle);
  try {
    set_timeouts(*client, request->timeout_us);
    httplib::Params params;
    for (std::size_t i = 0; i < request->param_count; ++i) {
      params.emplace(request->params[2 * i], request->params[2 * i + 1]);
    }
    const auto result = client->Get(
        request->path, params, httplib::Headers{{"Accept", "application/json"}},
        [request](const httplib::Response& response) {
          const std::string location = response.get_header_value("Location");
          return request->on_status(request->context, response.status, location.c_str()) != 0;
        },
        [request](const char* data, std::size_t length) {
          return request->on_body(request->context, data, length) != 0;
        });
    return result ? GPUREAP_HTTP_OK : error_code(result.error());
  } catch (const std::bad_alloc&) {
    // cpp-httplib 0.11 bounds each header line but not their number: headers without end grow
    // until the caller's memory limit (fleet sets one) makes an allocation fail here.
    return GPUREAP_HTTP_OUT_OF_MEMORY;
  } catch (...) {
    return GPUREAP_HTTP_OTHER;
  }
}

int post(void* handle, const gpureap_http_post* request) {
  auto* client = static_cast<httplib::ClientImpl*>(handle);
  try {
    set_timeouts(*client, request->timeout_us);
    // A request of our own, so that the answer's body is streamed to on_body (which bounds it)
    // rather than gathered whole.
    httplib::Request req;
    req.method = "POST";
    req.path = request->path;
    req.headers.emplace("Content-Type", request->content_type);
    req.body.assign(request->body, request->body_size);
    req.content_receiver = [request](const char* data, std::size_t length, std::uint64_t, std::uint64_t) {
      return request->on_body(request->context, data, length) != 0;
    };
    const auto result = client->send(req);
    if (!result) return error_code(result.error());
    // The status from the result: a request's own response_handler is not called by the
    // library's send() (0.11.4 as Debian builds it).
    const std::string location = result->get_header_value("Location");
    request->on_status(request->context, result->status, location.c_str());
    return GPUREAP_HTTP_OK;
  } catch (const std::bad_alloc&) {
    return GPUREAP_HTTP_OUT_OF_MEMORY;
  } catch (...) {
    return GPUREAP_HTTP_OTHER;
  }
}

void close(void* client) { delete static_cast<httplib::ClientImpl*>(client); }

}  // namespace gpureap_http_module_client
