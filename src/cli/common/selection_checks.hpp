// Filters that name something which does not exist are errors, not an empty listing: a
// misspelt user must not read as "no processes" (ps) or "nothing matched" (kill).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/common/cli11_declarations.hpp"

#include "accounts/account_lookup.hpp"  // resolve_user: the uid a --user value names
#include "proc/process_table.hpp"

namespace gpureap {

// "" when every --user value is a numeric uid (accepted without a passwd entry) or a name the
// user database knows; else one line for `command` ("gpureap ps") naming the first unknown one.
std::string check_user_names(const std::vector<std::string>& users, const std::string& command);


// Whether `prefix` (not empty) begins the container's id or its pod's UID, for the user running
// gpureap (container_selected_by: another user's rootless container never matches): what
// --container selects, in ps's and kill's filters and in the check that it names a container.
bool container_has_prefix(const ContainerRef& container, const std::string& prefix);

// "" when every --container prefix names exactly one container (by id prefix) or one pod (by
// UID prefix) that some process here runs in; else one line naming the first prefix that names
// none (saying so when it is only another user's rootless container) or several (naming them).
// Reads the details of every process: a container of processes not read yet is a candidate too.
std::string check_containers(ProcessTable& table, const std::vector<std::string>& prefixes, const std::string& command);

// An option given an empty value (`--gpus "$UNSET"`) is not an option left out: it would widen
// a selection to every GPU, or drop the cgroup that proves whose processes they are. Records
// the first such option's name in `empty_option`, for the command's usage check to refuse.
CLI::Option* refuse_empty(CLI::Option* option, std::string& empty_option);

}  // namespace gpureap
