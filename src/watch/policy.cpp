#include "watch/policy.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "drm/fdinfo_record.hpp"
#include "kill/config_file.hpp"
#include "proc/proc_io.hpp"
#include "accounts/account_lookup.hpp"
#include "text/byte_size.hpp"
#include "text/duration.hpp"
#include "text/sanitize.hpp"
#include "watch/notify_channels.hpp"

namespace gpureap {
namespace {

constexpr std::uint64_t kMaxBytes = 1ull << 50;  // 1 PiB: beyond any GPU

// One error, the first, as "<file>:<line>:<column>: <what>"; the parse stops there.
struct PolicyError {
  std::string text;
};

class PolicyReader {
 public:
  explicit PolicyReader(std::string source) : source_(std::move(source)) {}

  Policy read(const toml::table& root) {
    Policy policy;
    policy.source = source_;
    known(root, {"mode", "interval", "full_scan_interval", "audit_log", "terminate", "limits", "notify", "exclude", "rule"},
          "");
    if (const auto* node = root.get("mode")) policy.mode = mode(*node);
    if (const auto* node = root.get("interval")) {
      policy.interval_seconds =
          duration(*node, "interval", policy_limits::kMinIntervalSeconds, policy_limits::kMaxIntervalSeconds);
    }
    policy.full_scan_seconds = std::max(policy.full_scan_seconds, policy.interval_seconds);
    if (const auto* node = root.get("full_scan_interval")) {
      policy.full_scan_seconds = duration(*node, "full_scan_interval", policy.interval_seconds,
                                          policy_limits::kMaxFullScanSeconds, " (at least the interval)");
    }
    if (const auto* node = root.get("audit_log")) policy.audit_log = path(*node, "audit_log");
    if (const auto* node = root.get("terminate")) {
      const toml::table& t = table(*node, "terminate");
      known(t, {"kill_timeout", "verify_timeout"}, "terminate.");
      if (const auto* v = t.get("kill_timeout")) {
        policy.kill_timeout_seconds = duration(*v, "terminate.kill_timeout", 0, policy_limits::kMaxTimeoutSeconds);
      }
      if (const auto* v = t.get("verify_timeout")) {
        policy.verify_timeout_seconds = duration(*v, "terminate.verify_timeout", 0, policy_limits::kMaxTimeoutSeconds);
      }
    }
    if (const auto* node = root.get("limits")) {
      const toml::table& t = table(*node, "limits");
      known(t, {"max_terminations", "window"}, "limits.");
      if (const auto* v = t.get("max_terminations")) {
        policy.max_terminations = static_cast<unsigned>(integer(*v, "limits.max_terminations", 0, 10000));
      }
      if (const auto* v = t.get("window")) {
        policy.cap_window_seconds = duration(*v, "limits.window", policy.interval_seconds, policy_limits::kMaxGraceSeconds,
                                             " (at least the interval)");
      }
    }
    if (const auto* node = root.get("notify")) policy.notify = notify(*node);
    if (const auto* node = root.get("exclude")) {
      const toml::table& t = table(*node, "exclude");
      known(t, {"users", "groups", "executables", "containers"}, "exclude.");
      policy.exclude = exclusion(t, "exclude.", "");
    }
    if (const auto* node = root.get("rule")) policy.rules = rules(*node, policy);
    return policy;
  }

 private:
  [[noreturn]] void fail(const toml::node& node, const std::string& what) const {
    throw PolicyError{fmt::format("{}: {}", toml_where(source_, node), what)};
  }

  void known(const toml::table& table, std::initializer_list<std::string_view> names, const std::string& prefix) const {
    std::string error;
    if (!toml_only_known(source_, table, names, prefix, error)) throw PolicyError{error};
  }

  const toml::table& table(const toml::node& node, std::string_view key) const {
    if (!node.is_table()) fail(node, fmt::format("[{}] must be a table", key));
    return *node.as_table();
  }

  std::string string(const toml::node& node, std::string_view key, std::string_view expected) const {
    const auto text = node.value<std::string>();
    if (!node.is_string() || !text) fail(node, fmt::format("{} must be {}", key, expected));
    return *text;
  }

  std::string path(const toml::node& node, std::string_view key) const {
    std::string text = string(node, key, "a file path (a string)");
    if (text.empty() || text.front() != '/') fail(node, fmt::format("{} must be an absolute path", key));
    return text;
  }

  // A PEM file of CA certificates, read now so that a missing or wrong file is told with its
  // place (the HTTP module reads it again at each delivery, after a reload too).
  std::string ca_file(const toml::node& node, std::string_view key) const {
    std::string file = path(node, key);
    std::string error;
    const auto text = procfs::read_bounded_file(file, kMaxConfigBytes, key, error, procfs::FileTrust::RootOrInvoker);
    if (!text) fail(node, sanitize_for_terminal(error));
    if (text->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      fail(node, fmt::format("{} {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", key, sanitize_for_terminal(file)));
    }
    return file;
  }

  std::int64_t integer(const toml::node& node, std::string_view key, std::int64_t min, std::int64_t max) const {
    const auto value = node.value_exact<std::int64_t>();
    if (!node.is_integer() || !value) fail(node, fmt::format("{} must be a whole number from {} to {}", key, min, max));
    if (*value < min || *value > max) {
      fail(node, fmt::format("{} = {}: out of bounds: give a whole number from {} to {}", key, *value, min, max));
    }
    return *value;
  }

  double number(const toml::node& node, std::string_view key, double min, double max) const {
    if (!node.is_number()) fail(node, fmt::format("{} must be a number from {} to {}", key, min, max));
    const double value = node.is_integer() ? static_cast<double>(*node.value_exact<std::int64_t>()) : *node.value_exact<double>();
    if (!(value >= min && value <= max)) fail(node, fmt::format("{} = {}: out of bounds: give a number from {} to {}", key, value, min, max));
    return value;
  }

  double duration(const toml::node& node, std::string_view key, double min, double max,
                  std::string_view bound_note = "") const {
    const std::string text = string(node, key, "a duration string such as \"30s\", \"10m\" or \"2h\"");
    double seconds = 0;
    const std::string error = check_duration_option(key, text, max, seconds, min);
    if (!error.empty()) fail(node, error + std::string(bound_note));
    return seconds;
  }

  std::uint64_t size(const toml::node& node, std::string_view key) const {
    const std::string text = string(node, key, "a size string such as \"512MiB\" or \"2GiB\"");
    std::string why;
    const auto bytes = parse_byte_size(text, kMaxBytes, &why);
    if (!bytes) fail(node, fmt::format("{} {}: {}", key, sanitize_for_terminal(text), why));
    return *bytes;
  }

  const toml::array& array(const toml::node& node, std::string_view key, std::string_view of) const {
    if (!node.is_array()) fail(node, fmt::format("{} must be an array of {}", key, of));
    return *node.as_array();
  }

  std::vector<std::string> strings(const toml::node& node, std::string_view key, std::string_view of) const {
    std::vector<std::string> out;
    for (const auto& item : array(node, key, of)) {
      std::string text = string(item, key, fmt::format("an array of {}", of));
      if (text.empty()) fail(item, fmt::format("{} must not contain an empty string", key));
      out.push_back(std::move(text));
    }
    return out;
  }

  WatchMode mode(const toml::node& node) const {
    const std::string text = string(node, "mode", "\"dry-run\" or \"enforce\"");
    if (text == "dry-run") return WatchMode::DryRun;
    if (text == "enforce") return WatchMode::Enforce;
    fail(node, fmt::format("mode \"{}\": give \"dry-run\" (log and notify only) or \"enforce\" (end processes)",
                           sanitize_for_terminal(text)));
  }

  // Users or groups: names the databases know, or numeric ids (strings or integers).
  std::vector<NamedId> accounts(const toml::node& node, std::string_view key, bool groups) const {
    const std::string_view kind = groups ? "group" : "user";
    std::vector<NamedId> out;
    for (const auto& item : array(node, key, fmt::format("{} names or ids", kind))) {
      std::string name;
      if (item.is_integer()) {
        name = std::to_string(integer(item, key, 0, 0xfffffffe));
      } else {
        name = string(item, key, fmt::format("an array of {} names or ids", kind));
      }
      const auto id = groups ? resolve_group(name) : resolve_user(name);
      if (!id) {
        fail(item, fmt::format("{}: no such {} \"{}\" in the {} database; give an existing name or a numeric id", key,
                               kind, sanitize_for_terminal(name), kind));
      }
      out.push_back({name, static_cast<unsigned>(*id)});
    }
    return out;
  }

  std::vector<GpuRef> gpus(const toml::node& node, std::string_view key) const {
    std::vector<GpuRef> out;
    for (const auto& item : array(node, key, "GPU indices, UUIDs or PCI addresses")) {
      if (item.is_integer()) {
        out.push_back({static_cast<unsigned>(integer(item, key, 0, 4095)), "", toml_where(source_, item), ""});
        continue;
      }
      std::string text =
          string(item, key, "an array of GPU indices (0), UUIDs (\"GPU-...\") or PCI addresses (\"0000:03:00.0\")");
      std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
      if (auto pci = drm::canonical_pci_address(text)) {
        out.push_back({std::nullopt, "", toml_where(source_, item), std::move(*pci)});
        continue;
      }
      if (text.size() <= 4 || (text.rfind("gpu-", 0) != 0 && text.rfind("mig-", 0) != 0)) {
        fail(item, fmt::format("{}: \"{}\" is not a GPU index, UUID (\"GPU-...\") or PCI address (\"0000:03:00.0\")",
                               key, sanitize_for_terminal(text)));
      }
      out.push_back({std::nullopt, text, toml_where(source_, item), ""});
    }
    return out;
  }

  std::vector<std::string> executables(const toml::node& node, std::string_view key) const {
    auto paths = strings(node, key, "executable paths");
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (paths[i].front() != '/') {
        fail(*node.as_array()->get(i), fmt::format("{}: \"{}\" must be an absolute path (a trailing * matches a prefix)",
                                                   key, sanitize_for_terminal(paths[i])));
      }
    }
    return paths;
  }

  // The keys of an exclusion, `prefix` + name in the table (exclude.users, rule's except_users).
  ProcessExclusion exclusion(const toml::table& t, const std::string& shown_prefix, const std::string& key_prefix) const {
    ProcessExclusion out;
    const auto key = [&](const char* name) { return key_prefix + name; };
    const auto shown = [&](const char* name) { return shown_prefix + key_prefix + name; };
    if (const auto* v = t.get(key("users"))) out.users = accounts(*v, shown("users"), false);
    if (const auto* v = t.get(key("groups"))) out.groups = accounts(*v, shown("groups"), true);
    if (const auto* v = t.get(key("executables"))) out.executables = executables(*v, shown("executables"));
    if (const auto* v = t.get(key("containers"))) out.containers = strings(*v, shown("containers"), "container ids or pod UIDs");
    return out;
  }

  NotifySettings notify(const toml::node& node) const {
    const toml::table& t = table(node, "notify");
    known(t, {"command", "command_timeout", "webhook", "webhook_timeout", "webhook_ca_file"}, "notify.");
    NotifySettings out;
    bool webhook_https = false;
    if (const auto* v = t.get("command")) {
      out.command = strings(*v, "notify.command", "arguments (the program first, an absolute path)");
      if (out.command.empty() || out.command.front().front() != '/') {
        fail(*v, "notify.command must start with the program's absolute path: it is run directly, never by a shell");
      }
    }
    if (const auto* v = t.get("command_timeout")) {
      out.command_timeout_seconds = duration(*v, "notify.command_timeout", 0.01, policy_limits::kMaxTimeoutSeconds);
    }
    if (const auto* v = t.get("webhook")) {
      out.webhook = string(*v, "notify.webhook", "a URL (a string)");
      // Checked as it will be sent: a URL the client would refuse fails here, with its place,
      // not at every delivery. The URL itself is not repeated: it may hold a password.
      std::string why;
      const auto target = parse_webhook_url(out.webhook, why);
      if (!target) fail(*v, "notify.webhook: " + why);
      webhook_https = target->origin.scheme == UrlScheme::Https;
    }
    if (const auto* v = t.get("webhook_ca_file")) {
      if (out.webhook.empty() || !webhook_https) fail(*v, "notify.webhook_ca_file applies to an https:// webhook only");
      out.webhook_ca_file = ca_file(*v, "notify.webhook_ca_file");
    }
    if (const auto* v = t.get("webhook_timeout")) {
      out.webhook_timeout_seconds = duration(*v, "notify.webhook_timeout", 0.01, policy_limits::kMaxTimeoutSeconds);
    }
    return out;
  }

  Condition condition(const toml::node& node) const {
    const std::string text = string(node, "condition", "one of \"idle\", \"over-age\", \"memory\", \"orphan\", \"zombie\"");
    for (Condition c : {Condition::Idle, Condition::OverAge, Condition::Memory, Condition::Orphan, Condition::Zombie}) {
      if (text == condition_name(c)) return c;
    }
    fail(node, fmt::format("condition \"{}\": give one of \"idle\", \"over-age\", \"memory\", \"orphan\", \"zombie\"",
                           sanitize_for_terminal(text)));
  }

  RuleAction action(const toml::node& node) const {
    const std::string text = string(node, "action", "\"log\", \"notify\" or \"terminate\"");
    for (RuleAction a : {RuleAction::Log, RuleAction::Notify, RuleAction::Terminate}) {
      if (text == rule_action_name(a)) return a;
    }
    fail(node, fmt::format("action \"{}\": give \"log\", \"notify\" or \"terminate\"", sanitize_for_terminal(text)));
  }

  std::vector<Rule> rules(const toml::node& node, const Policy& policy) const {
    if (!node.is_array_of_tables()) fail(node, "rules are written as [[rule]] tables");
    const toml::array& list = *node.as_array();
    if (list.size() > policy_limits::kMaxRules) fail(node, fmt::format("at most {} rules", policy_limits::kMaxRules));
    std::vector<Rule> out;
    std::set<std::string> names;
    for (const auto& item : list) {
      Rule r = rule(*item.as_table());
      if (!names.insert(r.name).second) fail(item, fmt::format("a second rule named \"{}\": names must differ", r.name));
      if (r.action == RuleAction::Notify && policy.notify.command.empty() && policy.notify.webhook.empty()) {
        fail(item, fmt::format("rule \"{}\": action \"notify\" needs [notify] command or webhook", r.name));
      }
      out.push_back(std::move(r));
    }
    return out;
  }

  Rule rule(const toml::table& t) const {
    known(t, {"name", "condition", "action", "grace", "idle_for", "max_sm_util", "max_cpu_percent", "older_than",
              "memory_above", "users", "groups", "command", "gpus", "containers", "min_memory", "except_users",
              "except_groups", "except_executables", "except_containers"},
          "rule.");
    Rule r;
    r.line = t.source().begin.line;
    const auto* name = t.get("name");
    if (name == nullptr) fail(t, "a [[rule]] needs a name (it labels logs, notifications and metrics)");
    r.name = string(*name, "rule.name", "a string");
    const bool plain = !r.name.empty() && r.name.size() <= 64 && std::all_of(r.name.begin(), r.name.end(), [](unsigned char c) {
      return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
    });
    if (!plain) fail(*name, "rule.name: 1 to 64 letters, digits, '-', '_' or '.'");
    const auto* cond = t.get("condition");
    if (cond == nullptr) fail(t, fmt::format("rule \"{}\" needs a condition", r.name));
    r.condition = condition(*cond);
    if (const auto* v = t.get("action")) r.action = action(*v);
    const std::string rule_key = "rule \"" + r.name + "\": ";
    // A condition's parameters belong to it alone: "idle_for" under an over-age rule is a mistake.
    const auto only_for = [&](const char* key, Condition owner) -> const toml::node* {
      const auto* v = t.get(key);
      if (v != nullptr && r.condition != owner) {
        fail(*v, fmt::format("{}{} applies to condition \"{}\" only", rule_key, key, condition_name(owner)));
      }
      return v;
    };
    if (const auto* v = only_for("idle_for", Condition::Idle)) {
      r.idle_seconds = duration(*v, "idle_for", 0.01, policy_limits::kMaxConditionSeconds);
    } else if (r.condition == Condition::Idle) {
      fail(t, rule_key + "condition \"idle\" needs idle_for (such as \"2h\")");
    }
    if (const auto* v = only_for("max_sm_util", Condition::Idle)) {
      r.max_sm_util_percent = static_cast<unsigned>(integer(*v, "max_sm_util", 0, 100));
    }
    if (const auto* v = only_for("max_cpu_percent", Condition::Idle)) r.max_cpu_percent = number(*v, "max_cpu_percent", 0, 100);
    if (const auto* v = only_for("older_than", Condition::OverAge)) {
      r.older_than_seconds = duration(*v, "older_than", 0.01, policy_limits::kMaxConditionSeconds);
    } else if (r.condition == Condition::OverAge) {
      fail(t, rule_key + "condition \"over-age\" needs older_than (such as \"3d\")");
    }
    if (const auto* v = only_for("memory_above", Condition::Memory)) {
      r.memory_above_bytes = size(*v, "memory_above");
    } else if (r.condition == Condition::Memory) {
      fail(t, rule_key + "condition \"memory\" needs memory_above (such as \"40GiB\")");
    }
    if (const auto* v = t.get("grace")) {
      if (r.action != RuleAction::Terminate) fail(*v, rule_key + "grace applies to action \"terminate\" only");
      r.grace_seconds = duration(*v, "grace", 0, policy_limits::kMaxGraceSeconds);
    } else if (r.action == RuleAction::Terminate) {
      r.grace_seconds = 600;  // the owner hears of it ten minutes before
    }
    if (const auto* v = t.get("users")) r.match.users = accounts(*v, "users", false);
    if (const auto* v = t.get("groups")) r.match.groups = accounts(*v, "groups", true);
    if (const auto* v = t.get("command")) {
      r.match.command_text = string(*v, "command", "a regular expression (RE2 syntax) as a string");
      std::string error;
      r.match.command = CommandPattern::compile(r.match.command_text, error);
      if (!r.match.command) fail(*v, "command: " + sanitize_for_terminal(error));
    }
    if (const auto* v = t.get("gpus")) r.match.gpus = gpus(*v, "gpus");
    if (const auto* v = t.get("containers")) r.match.containers = strings(*v, "containers", "container ids or pod UIDs");
    if (const auto* v = t.get("min_memory")) r.match.min_memory = size(*v, "min_memory");
    r.except = exclusion(t, "", "except_");
    return r;
  }

  std::string source_;
};

}  // namespace

std::string_view watch_mode_name(WatchMode mode) { return mode == WatchMode::Enforce ? "enforce" : "dry-run"; }

std::string_view condition_name(Condition condition) {
  switch (condition) {
    case Condition::Idle: return "idle";
    case Condition::OverAge: return "over-age";
    case Condition::Memory: return "memory";
    case Condition::Orphan: return "orphan";
    case Condition::Zombie: return "zombie";
  }
  return "idle";
}

std::string_view rule_action_name(RuleAction action) {
  switch (action) {
    case RuleAction::Log: return "log";
    case RuleAction::Notify: return "notify";
    case RuleAction::Terminate: return "terminate";
  }
  return "log";
}

double driver_read_seconds(const Policy& policy) {
  double every = std::numeric_limits<double>::infinity();
  for (const Rule& rule : policy.rules) {
    if (rule.condition == Condition::Memory) every = 0;
    if (rule.condition == Condition::Idle) every = std::min(every, std::min(rule.idle_seconds / 10, kMaxDriverReadSeconds));
    if (rule.match.min_memory) every = std::min(every, kMaxDriverReadSeconds);
  }
  return std::max(every, policy.interval_seconds);
}

std::string check_policy_gpus(const Policy& policy, const std::map<unsigned, std::string>& gpu_uuids) {
  std::string known;
  for (const auto& [index, uuid] : gpu_uuids) known += fmt::format("{}{}", known.empty() ? "" : ", ", index);
  if (known.empty()) known = "none";
  for (const Rule& rule : policy.rules) {
    for (const GpuRef& ref : rule.match.gpus) {
      if (!ref.pci.empty()) continue;  // check_policy_drm_gpus
      std::size_t matches = 0;
      for (const auto& [index, uuid] : gpu_uuids) {
        if (ref.index ? *ref.index == index : uuid.compare(0, ref.uuid.size(), ref.uuid) == 0) ++matches;
      }
      if (ref.index && matches == 0) {
        return fmt::format("{}: rule \"{}\": gpus: no GPU {} on this host (it has: {})", ref.where, rule.name, *ref.index, known);
      }
      if (!ref.index && matches != 1) {
        return fmt::format("{}: rule \"{}\": gpus: {} {}", ref.where, rule.name, sanitize_for_terminal(ref.uuid),
                           matches == 0 ? "names no GPU on this host" : "names more than one GPU");
      }
    }
  }
  return {};
}

std::string check_policy_drm_gpus(const Policy& policy, const std::vector<std::string>& pci_addresses) {
  for (const Rule& rule : policy.rules) {
    for (const GpuRef& ref : rule.match.gpus) {
      if (ref.pci.empty() || std::find(pci_addresses.begin(), pci_addresses.end(), ref.pci) != pci_addresses.end()) continue;
      std::string known;
      for (const auto& pci : pci_addresses) known += fmt::format("{}{}", known.empty() ? "" : ", ", pci);
      return fmt::format("{}: rule \"{}\": gpus: no AMD or Intel GPU at {} on this host (it has: {})", ref.where, rule.name,
                         ref.pci, known.empty() ? "none" : known);
    }
  }
  return {};
}

std::optional<Policy> parse_policy(std::string_view text, const std::string& source, std::string& error) {
  const auto root = parse_toml(text, source, error);
  if (!root) return std::nullopt;
  try {
    return PolicyReader(source).read(*root);
  } catch (const PolicyError& e) {
    error = e.text;
    return std::nullopt;
  }
}

std::optional<Policy> load_policy(const std::string& path, std::string& error) {
  const auto text =
      procfs::read_bounded_file(path, kMaxConfigBytes, "policy file", error, procfs::FileTrust::RootOrInvoker);
  if (!text) return std::nullopt;
  return parse_policy(*text, path, error);
}

}  // namespace gpureap
