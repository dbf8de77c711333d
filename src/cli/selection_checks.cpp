#include "cli/selection_checks.hpp"

#include <pwd.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

namespace gpureap {
namespace {

bool is_uid(const std::string& text) {
  return !text.empty() && text.size() <= 10 &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

bool user_exists(const std::string& name) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  return getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr;
}

}  // namespace

std::string check_user_names(const std::vector<std::string>& users, const std::string& command) {
  for (const auto& user : users) {
    if (is_uid(user) || user_exists(user)) continue;
    return fmt::format("{}: --user {}: no such user in the user database; give an existing name or a numeric uid",
                       command, user);
  }
  return {};
}

}  // namespace gpureap
