#include "kill/kill_config.hpp"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace gpureap {

std::optional<KillConfig> load_kill_config_from(const std::string& path, bool must_exist, std::string& error) {
  KillConfig config;
  if (access(path.c_str(), F_OK) != 0) {
    if (!must_exist) return config;
    error = fmt::format("configuration file {} does not exist (named by GPUREAP_CONFIG)", path);
    return std::nullopt;
  }
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    error = fmt::format("{}:{}:{}: {}", path, where.line, where.column, e.description());
    return std::nullopt;
  }
  config.path = path;
  const toml::node_view kill = table["kill"];
  if (!kill) return config;
  if (!kill.is_table()) {
    error = fmt::format("{}: [kill] must be a table", path);
    return std::nullopt;
  }
  if (const toml::node_view protect = kill["protect"]) {
    const toml::array* names = protect.as_array();
    if (names == nullptr) {
      error = fmt::format("{}: kill.protect must be an array of names", path);
      return std::nullopt;
    }
    for (const auto& name : *names) {
      const auto text = name.value<std::string>();
      if (!text || text->empty()) {
        error = fmt::format("{}: kill.protect must contain non-empty strings", path);
        return std::nullopt;
      }
      config.protect.push_back(*text);
    }
  }
  if (const toml::node_view audit = kill["audit_log"]) {
    const auto text = audit.value<std::string>();
    if (!text) {
      error = fmt::format("{}: kill.audit_log must be a string (a file path)", path);
      return std::nullopt;
    }
    config.audit_log = *text;
  }
  return config;
}

std::optional<KillConfig> load_kill_config(std::string& error) {
  if (const char* env = std::getenv("GPUREAP_CONFIG"); env != nullptr && env[0] != '\0') {
    return load_kill_config_from(env, true, error);
  }
  return load_kill_config_from("/etc/gpureap/config.toml", false, error);
}

}  // namespace gpureap
