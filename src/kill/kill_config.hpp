// The `[kill]` table of gpureap's configuration file ($GPUREAP_CONFIG, else
// /etc/gpureap/config.toml): extra protected process names and a default audit log.
//
//   [kill]
//   protect = ["slurmstepd", "my-exporter", "prometheus*"]
//   audit_log = "/var/log/gpureap/kill.log"
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpureap {

struct KillConfig {
  std::string path;                  // the file read, "" when none
  std::vector<std::string> protect;  // added to the built-in protected names
  std::string audit_log;             // used when neither --audit-log nor GPUREAP_AUDIT_LOG is set
};

// $GPUREAP_CONFIG when set (then the file must exist), else /etc/gpureap/config.toml when it
// exists. nullopt with `error` set when the file named cannot be read or is not valid.
std::optional<KillConfig> load_kill_config(std::string& error);

// Where the audit log goes: `option` (--audit-log) when given, else $GPUREAP_AUDIT_LOG, else the
// configuration's audit_log; "" for none.
std::string audit_log_path(const std::string& option, const KillConfig& config);
std::optional<KillConfig> load_kill_config_from(const std::string& path, bool must_exist, std::string& error);
// The same rules for configuration text already in memory; `source` names it in errors
// ("<source>:<line>:<column>: ...") and becomes KillConfig::path.
std::optional<KillConfig> parse_kill_config(std::string_view text, const std::string& source,
                                            std::string& error);

}  // namespace gpureap
