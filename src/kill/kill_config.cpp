#include "kill/kill_config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "proc/proc_io.hpp"
#include "text/sanitize.hpp"

namespace gpureap {

namespace {

constexpr std::size_t kMaxConfigBytes = 1 << 20;

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



// The [kill] table of a parsed document; `source` names it in errors.
std::optional<KillConfig> config_from_table(const toml::table& table, const std::string& source,
                                            std::string& error) {
  KillConfig config;
  config.path = source;
  if (!only_known(source, table, {"kill"}, "", error)) return std::nullopt;
  const toml::node_view kill = table["kill"];
  if (!kill) return config;
  if (!kill.is_table()) {
    error = fmt::format("{}: [kill] must be a table", source);
    return std::nullopt;
  }
  if (!only_known(source, *kill.as_table(), {"protect", "audit_log"}, "kill.", error)) return std::nullopt;
  if (const toml::node_view protect = kill["protect"]) {
    const toml::array* names = protect.as_array();
    if (names == nullptr) {
      error = fmt::format("{}: kill.protect must be an array of names", source);
      return std::nullopt;
    }
    for (const auto& name : *names) {
      const auto text = name.value<std::string>();
      if (!text || text->empty()) {
        error = fmt::format("{}: kill.protect must contain non-empty strings", source);
        return std::nullopt;
      }
      config.protect.push_back(*text);
    }
  }
  if (const toml::node_view audit = kill["audit_log"]) {
    const auto text = audit.value<std::string>();
    if (!text) {
      error = fmt::format("{}: kill.audit_log must be a string (a file path)", source);
      return std::nullopt;
    }
    config.audit_log = *text;
  }
  return config;
}

// toml++ quotes the offending input in its description ("saw 't\n'") raw: the one terminal
// sanitiser keeps the error one line that cannot drive a terminal.
std::string parse_error_text(const toml::parse_error& e, const std::string& source) {
  const auto& where = e.source().begin;
  return fmt::format("{}:{}:{}: {}", source, where.line, where.column, sanitize_for_terminal(e.description()));
}

}  // namespace

std::optional<KillConfig> parse_kill_config(std::string_view text, const std::string& source,
                                            std::string& error) {
  toml::table table;
  try {
    table = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    error = parse_error_text(e, source);
    return std::nullopt;
  }
  return config_from_table(table, source, error);
}

std::optional<KillConfig> load_kill_config_from(const std::string& path, bool must_exist, std::string& error) {
  if (access(path.c_str(), F_OK) != 0) {
    if (!must_exist) return KillConfig{};
    error = fmt::format("configuration file {} does not exist (named by GPUREAP_CONFIG)", path);
    return std::nullopt;
  }
  const auto contents = procfs::read_bounded_file(path, kMaxConfigBytes, "configuration file", error);
  if (!contents) return std::nullopt;
  return parse_kill_config(*contents, path, error);
}

std::optional<KillConfig> load_kill_config(std::string& error) {
  if (const char* env = std::getenv("GPUREAP_CONFIG"); env != nullptr && env[0] != '\0') {
    return load_kill_config_from(env, true, error);
  }
  return load_kill_config_from("/etc/gpureap/config.toml", false, error);
}

std::string audit_log_path(const std::string& option, const KillConfig& config) {
  if (!option.empty()) return option;
  if (const char* env = std::getenv("GPUREAP_AUDIT_LOG"); env != nullptr && *env != '\0') return env;
  return config.audit_log;
}

}  // namespace gpureap
