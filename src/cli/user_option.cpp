#include "cli/user_option.hpp"

#include <pwd.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

bool is_uid(const std::string& text) {
  return !text.empty() && text.size() <= 10 &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

bool account_exists(const std::string& name) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  return getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr;
}

}  // namespace

std::string check_user_option(const std::string& command, const std::vector<std::string>& users) {
  for (const std::string& user : users) {
    if (is_uid(user)) continue;
    if (user.size() <= 256 && user.find('\0') == std::string::npos && account_exists(user)) continue;
    const std::string shown = user.size() > 64 ? user.substr(0, 64) + "..." : user;
    return fmt::format("{}: --user {}: no such user (give an account name or a numeric uid)", command,
                       sanitize_for_terminal(shown));
  }
  return {};
}

}  // namespace gpureap
