// The client half of gpureap-http.so (fleet's queries, watch's webhook), for the module's entry table in
// httplib_server.cpp. Inside the module only.
#pragma once

#include "http/http_module_abi.hpp"

namespace gpureap_http_module_client {

void* open(const gpureap_http_client_config* config);
int get(void* client, const gpureap_http_get* request);
int post(void* client, const gpureap_http_post* request);
void close(void* client);

}  // namespace gpureap_http_module_client
