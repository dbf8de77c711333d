// `--user NAME|UID` of ps and kill: a name no account has is a usage error, not an empty
// listing ("no processes") or "nothing matched" that reads like a healthy answer.
#pragma once

#include <string>
#include <vector>

namespace gpureap {

// "" when every entry is a decimal uid or an existing account's name; else one line for the
// user, starting with `command` ("gpureap ps").
std::string check_user_option(const std::string& command, const std::vector<std::string>& users);

}  // namespace gpureap
