#include "cli/common/selection_checks.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <cctype>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include "accounts/account_lookup.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

// What the user typed, cut to 64 characters and made safe for a terminal.
std::string shown(const std::string& text) {
  return sanitize_for_terminal(text.size() > 64 ? text.substr(0, 64) + "..." : text);
}

}  // namespace

bool container_has_prefix(const ContainerRef& container, const std::string& prefix) {
  return container_selected_by(container, prefix, ::getuid());
}

CLI::Option* refuse_empty(CLI::Option* option, std::string& empty_option) {
  return option->each([option, &empty_option](const std::string& value) {
    if (value.empty() && empty_option.empty()) empty_option = option->get_name();
  });
}

std::string check_containers(ProcessTable& table, const std::vector<std::string>& prefixes, const std::string& command) {
  if (prefixes.empty()) return {};
  std::vector<pid_t> pids;
  for (const auto& entry : table.processes()) {
    if (!entry.second.details_loaded) pids.push_back(entry.first);
  }
  table.load_details(pids);
  for (const auto& prefix : prefixes) {
    // What the prefix names: a pod when it begins the pod's UID (all its containers are the
    // pod), else each container whose id it begins.
    std::set<std::string> named;
    std::set<std::string> others_rootless;
    for (const auto& entry : table.processes()) {
      const auto& c = entry.second.container;
      if (!c || prefix.empty()) continue;
      const bool by_pod = c->pod_uid.starts_with(prefix);
      if (!by_pod && !c->id.starts_with(prefix)) continue;
      ContainerRef shown_as = *c;
      if (by_pod) shown_as.id.clear();
      if (container_has_prefix(*c, prefix)) {
        named.insert(container_words(shown_as));
      } else {
        others_rootless.insert(container_words(shown_as));
      }
    }
    if (named.size() > 1) {
      std::string list;
      for (const auto& name : named) list += (list.empty() ? "" : ", ") + name;
      return fmt::format("{}: --container {}: that prefix names {} containers here ({}); give enough of the id to name "
                         "one",
                         command, shown(prefix), named.size(), sanitize_for_terminal(list));
    }
    if (!named.empty()) continue;
    if (!others_rootless.empty()) {
      return fmt::format("{}: --container {}: only another user's rootless container has that id ({}): its user named "
                         "it in their own cgroup tree, which proves nothing; select its processes with --user",
                         command, shown(prefix), sanitize_for_terminal(*others_rootless.begin()));
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
