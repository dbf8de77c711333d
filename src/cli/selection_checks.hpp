// Filters that name something which does not exist are errors, not an empty listing: a
// misspelt user must not read as "no processes" (ps) or "nothing matched" (kill).
#pragma once

#include <string>
#include <vector>

namespace gpureap {

// "" when every --user value is a numeric uid (accepted without a passwd entry) or a name the
// user database knows; else one line for `command` ("gpureap ps") naming the first unknown one.
std::string check_user_names(const std::vector<std::string>& users, const std::string& command);

}  // namespace gpureap
