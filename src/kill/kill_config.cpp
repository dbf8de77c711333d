#include "kill/kill_config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace gpureap {
namespace {

// "<path>:<line>:<column>" of a node, so an error points at the line to fix.
std::string where(const std::string& path, const toml::node& node) {
  const auto& begin = node.source().begin;
  if (begin.line == 0) return path;
  return fmt::format("{}:{}:{}", path, begin.line, begin.column);
}

// Unknown sections and keys are errors: a misspelt `protekt` or `[Kill]` would otherwise
// silently drop the protection it was written for.
bool only_known(const std::string& path, const toml::table& table, std::initializer_list<std::string_view> known,
                const std::string& prefix, std::string& error) {
  for (const auto& [key, node] : table) {
    if (std::find(known.begin(), known.end(), std::string_view(key.str())) != known.end()) continue;
    std::string names;
    for (auto k : known) names += fmt::format("{}{}{}", names.empty() ? "" : ", ", prefix, k);
    error = fmt::format("{}: unknown {} '{}{}' (known: {}); a misspelt name would silently be ignored", where(path, node),
                        node.is_table() ? "section" : "key", prefix, key.str(), names);
    return false;
  }
  return true;
}

}  // namespace

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
    const auto& at = e.source().begin;
    error = fmt::format("{}:{}:{}: {}", path, at.line, at.column, e.description());
    return std::nullopt;
  }
  config.path = path;
  if (!only_known(path, table, {"kill"}, "", error)) return std::nullopt;
  const toml::node* kill_node = table.get("kill");
  if (kill_node == nullptr) return config;
  const toml::table* kill = kill_node->as_table();
  if (kill == nullptr) {
    error = fmt::format("{}: kill must be a table ([kill])", where(path, *kill_node));
    return std::nullopt;
  }
  if (!only_known(path, *kill, {"protect", "audit_log"}, "kill.", error)) return std::nullopt;
  if (const toml::node* protect = kill->get("protect")) {
    const toml::array* names = protect->as_array();
    if (names == nullptr) {
      error = fmt::format("{}: kill.protect must be an array of names", where(path, *protect));
      return std::nullopt;
    }
    for (const auto& name : *names) {
      const auto text = name.value_exact<std::string>();
      if (!text || text->empty()) {
        error = fmt::format("{}: kill.protect must contain non-empty strings", where(path, name));
        return std::nullopt;
      }
      config.protect.push_back(*text);
    }
  }
  if (const toml::node* audit = kill->get("audit_log")) {
    const auto text = audit->value_exact<std::string>();
    if (!text) {
      error = fmt::format("{}: kill.audit_log must be a string (a file path)", where(path, *audit));
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
