#include "exporter/web_config.hpp"
#include "exporter/yaml_nesting.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <set>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "exporter/basic_auth.hpp"
#include "proc/proc_io.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

constexpr std::size_t kMaxWebConfigBytes = 1 << 20;

// exporter-toolkit keys gpureap does not implement: named, so the error says what to drop.
constexpr std::string_view kUnsupportedTlsKeys[] = {"cert", "key", "client_auth_type", "client_ca_file", "client_ca",
                                                    "client_allowed_sans", "cipher_suites", "curve_preferences",
                                                    "min_version", "max_version", "prefer_server_cipher_suites"};
constexpr std::string_view kUnsupportedTopKeys[] = {"http_server_config"};

struct ConfigError {
  std::string message;
};

class Reader {
 public:
  Reader(std::string source, std::string base_dir) : source_(std::move(source)), base_dir_(std::move(base_dir)) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& what) const {
    const YAML::Mark mark = node.Mark();
    if (mark.is_null()) throw ConfigError{fmt::format("{}: {}", source_, what)};
    throw ConfigError{fmt::format("{}:{}:{}: {}", source_, mark.line + 1, mark.column + 1, what)};
  }

  std::string scalar(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) fail(node, fmt::format("{} must be a string", key));
    return node.Scalar();
  }

  // The keys of a mapping, each once, all of them known.
  void check_keys(const YAML::Node& map, const std::string& where, std::initializer_list<std::string_view> known,
                  std::span<const std::string_view> unsupported) const {
    if (!map.IsMap()) fail(map, fmt::format("{} must be a mapping of keys to values", where));
    std::set<std::string> seen;
    for (const auto& entry : map) {
      const std::string key = scalar(entry.first, "a key");
      const std::string shown = sanitize_for_terminal(key);
      if (!seen.insert(key).second) fail(entry.first, fmt::format("{}{} appears twice", prefix(where), shown));
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      if (std::find(unsupported.begin(), unsupported.end(), key) != unsupported.end()) {
        fail(entry.first, fmt::format("{}{} is not supported by gpureap (it supports {})", prefix(where), shown,
                                      fmt::join(known, ", ")));
      }
      fail(entry.first, fmt::format("unknown key {}{} (known: {}); a misspelt key would silently be ignored",
                                    prefix(where), shown, fmt::join(known, ", ")));
    }
  }

  // An existing regular file, made absolute (relative to the configuration's directory).
  std::string file(const YAML::Node& node, const std::string& key) const {
    std::string path = scalar(node, key);
    if (path.empty()) fail(node, key + " is empty");
    if (path.front() != '/') path = (std::filesystem::path(base_dir_) / path).lexically_normal().string();
    const procfs::unique_fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    struct stat st {};
    if (!fd) fail(node, fmt::format("{} {}: cannot open it: {}", key, sanitize_for_terminal(path), std::strerror(errno)));
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      fail(node, fmt::format("{} {} is not a regular file", key, sanitize_for_terminal(path)));
    }
    return path;
  }

 private:
  static std::string prefix(const std::string& where) { return where == "the file" ? "" : where + "."; }

  std::string source_;
  std::string base_dir_;
};

void read_tls(const Reader& reader, const YAML::Node& tls, WebConfig& config) {
  reader.check_keys(tls, "tls_server_config", {"cert_file", "key_file"}, kUnsupportedTlsKeys);
  if (!tls["cert_file"] || !tls["key_file"]) reader.fail(tls, "tls_server_config needs both cert_file and key_file");
  config.cert_file = reader.file(tls["cert_file"], "cert_file");
  config.key_file = reader.file(tls["key_file"], "key_file");
}

void read_users(const Reader& reader, const YAML::Node& users, WebConfig& config) {
  if (!users.IsMap()) reader.fail(users, "basic_auth_users must map user names to bcrypt hashes");
  std::set<std::string> seen;
  for (const auto& entry : users) {
    const std::string name = reader.scalar(entry.first, "a user name");
    const std::string shown = sanitize_for_terminal(name);
    if (name.empty() || name.find(':') != std::string::npos) {
      reader.fail(entry.first, fmt::format("user name '{}': it must be non-empty and hold no ':' (basic auth sends "
                                           "user:password)",
                                           shown));
    }
    if (!seen.insert(name).second) reader.fail(entry.first, fmt::format("user {} appears twice", shown));
    const std::string hash = reader.scalar(entry.second, "the hash of user " + shown);
    if (!bcrypt_hash_is_valid(hash)) {
      reader.fail(entry.second, fmt::format("user {}: not a bcrypt hash ($2y$, $2b$ or $2a$, a cost from 04 to 31 "
                                            "and 53 characters; make one with htpasswd -nBC 10 {})",
                                            shown, shown));
    }
    config.basic_auth_users.emplace(name, hash);
  }
}

}  // namespace

std::optional<WebConfig> parse_web_config(std::string_view text, const std::string& source,
                                          const std::string& base_dir, std::string& error) {
  WebConfig config;
  config.path = source;
  if (const auto deep = yaml_too_deep(text)) {
    error = fmt::format("{}:{}:{}: nested deeper than {} levels; a web-config needs three", source, deep->line,
                        deep->column, kMaxYamlNesting);
    return std::nullopt;
  }
  const Reader reader(source, base_dir);
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    if (root.IsNull()) return config;  // an empty file: no TLS, no authentication, as the toolkit has it
    reader.check_keys(root, "the file", {"tls_server_config", "basic_auth_users"}, kUnsupportedTopKeys);
    if (const YAML::Node tls = root["tls_server_config"]; tls && !tls.IsNull()) read_tls(reader, tls, config);
    if (const YAML::Node users = root["basic_auth_users"]; users && !users.IsNull()) read_users(reader, users, config);
  } catch (const ConfigError& e) {
    error = e.message;
    return std::nullopt;
  } catch (const YAML::Exception& e) {
    error = e.mark.is_null() ? fmt::format("{}: not valid YAML: {}", source, sanitize_for_terminal(e.msg))
                             : fmt::format("{}:{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.mark.column + 1,
                                           sanitize_for_terminal(e.msg));
    return std::nullopt;
  }
  return config;
}

std::optional<WebConfig> load_web_config(const std::string& path, std::string& error) {
  const auto text = procfs::read_bounded_file(path, kMaxWebConfigBytes, "web-config file", error,
                                              procfs::FileTrust::RootOrInvoker);
  if (!text) return std::nullopt;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_web_config(*text, sanitize_for_terminal(path), dir.empty() ? "." : dir, error);
}

}  // namespace gpureap
