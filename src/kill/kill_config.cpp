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

#include "kill/config_file.hpp"
#include "proc/proc_io.hpp"

namespace gpureap {

namespace {

// The [kill] table of a parsed document; `source` names it in errors.
std::optional<KillConfig> config_from_table(const toml::table& table, const std::string& source,
                                            std::string& error) {
  KillConfig config;
  config.path = source;
  if (!toml_only_known(source, table, {"kill"}, "", error)) return std::nullopt;
  const toml::node_view kill = table["kill"];
  if (!kill) return config;
  if (!kill.is_table()) {
    error = fmt::format("{}: [kill] must be a table", source);
    return std::nullopt;
  }
  if (!toml_only_known(source, *kill.as_table(), {"protect", "audit_log"}, "kill.", error)) return std::nullopt;
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

}  // namespace

std::optional<KillConfig> parse_kill_config(std::string_view text, const std::string& source,
                                            std::string& error) {
  const auto table = parse_toml(text, source, error);
  if (!table) return std::nullopt;
  return config_from_table(*table, source, error);
}

std::optional<KillConfig> load_kill_config_from(const std::string& path, bool must_exist, std::string& error) {
  if (access(path.c_str(), F_OK) != 0) {
    if (!must_exist) return KillConfig{};
    error = fmt::format("configuration file {} does not exist (named by GPUREAP_CONFIG)", path);
    return std::nullopt;
  }
  const auto contents =
      procfs::read_bounded_file(path, kMaxConfigBytes, "configuration file", error, procfs::FileTrust::RootOrInvoker);
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
