#include "cli/common/selection_checks.hpp"

#include <algorithm>
#include <optional>
#include <cctype>
#include <vector>

#include <fmt/format.h>

#include "accounts/account_lookup.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

bool container_known(const ProcessTable& table, const std::string& prefix) {
  for (const auto& entry : table.processes()) {
    const auto& c = entry.second.container;
    if (c && container_has_prefix(*c, prefix)) return true;
  }
  return false;
}

// What the user typed, cut to 64 characters and made safe for a terminal.
std::string shown(const std::string& text) {
  return sanitize_for_terminal(text.size() > 64 ? text.substr(0, 64) + "..." : text);
}

}  // namespace

bool container_has_prefix(const ContainerRef& container, const std::string& prefix) {
  return !prefix.empty() && (container.id.starts_with(prefix) || container.pod_uid.starts_with(prefix));
}

CLI::Option* refuse_empty(CLI::Option* option, std::string& empty_option) {
  return option->each([option, &empty_option](const std::string& value) {
    if (value.empty() && empty_option.empty()) empty_option = option->get_name();
  });
}

std::string check_containers(ProcessTable& table, const std::vector<std::string>& prefixes, const std::string& command) {
  bool all_loaded = false;
  for (const auto& prefix : prefixes) {
    if (container_known(table, prefix)) continue;
    if (!all_loaded) {
      std::vector<pid_t> pids;
      for (const auto& entry : table.processes()) {
        if (!entry.second.details_loaded) pids.push_back(entry.first);
      }
      table.load_details(pids);
      all_loaded = true;
      if (container_known(table, prefix)) continue;
    }
    return fmt::format("{}: --container {}: no process here runs in a container with that id or pod UID prefix; "
                       "check the id (docker ps, crictl ps)",
                       command, shown(prefix));
  }
  return {};
}

std::string check_user_names(const std::vector<std::string>& users, const std::string& command) {
  for (const auto& user : users) {
    if (resolve_user(user)) continue;
    return fmt::format("{}: --user {}: no such user in the user database; give an existing name or a numeric uid",
                       command, shown(user));
  }
  return {};
}

}  // namespace gpureap
