// Users and groups by name, for what a person types or writes in a file (--user, a policy's
// users and groups): names through the system's databases (nsswitch), numbers as given.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace gpureap {

// The uid `user` names: a numeric uid as given (below 2^32 - 1, which means "no uid"), or a
// name's uid from the user database; nullopt when the name is unknown.
std::optional<uid_t> resolve_user(const std::string& user);

// The gid `group` names, the same way, from the group database.
std::optional<gid_t> resolve_group(const std::string& group);

// Every group `uid` belongs to: its primary group and the supplementary ones the group
// database lists for its name. Empty when the uid has no account.
std::vector<gid_t> groups_of_user(uid_t uid);

}  // namespace gpureap
