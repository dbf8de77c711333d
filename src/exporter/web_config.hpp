// --web-config FILE: TLS and basic auth in the form of Prometheus's exporter-toolkit, so the
// file people already write for node_exporter works here:
//
//   tls_server_config:
//     cert_file: /etc/gpureap/tls.crt     # relative paths: to the file's directory
//     key_file: /etc/gpureap/tls.key
//   basic_auth_users:
//     prometheus: $2y$10$...               # bcrypt (htpasswd -nBC 10 "" | tr -d ':\n')
//
// Every other key is an error (a misspelt key would silently drop the protection it was
// written for); the toolkit's keys gpureap does not implement (client certificates, cipher
// choices, HTTP headers) are errors that say so.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace gpureap {

struct WebConfig {
  std::string path;  // the file read; "" when none was given
  std::string cert_file, key_file;  // both set for TLS, made absolute
  std::map<std::string, std::string> basic_auth_users;  // name -> bcrypt hash

  bool tls() const { return !cert_file.empty(); }
  bool basic_auth() const { return !basic_auth_users.empty(); }
};

// nullopt with one line in `error`: "<file>:<line>:<column>: ..." where there is a position.
std::optional<WebConfig> load_web_config(const std::string& path, std::string& error);
// The same rules for text in memory; `source` names it in errors, relative paths are taken
// from `base_dir`.
std::optional<WebConfig> parse_web_config(std::string_view text, const std::string& source,
                                          const std::string& base_dir, std::string& error);

}  // namespace gpureap
