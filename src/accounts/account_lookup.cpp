#include "accounts/account_lookup.hpp"

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

namespace gpureap {
namespace {

constexpr std::size_t kBufferBytes = 16384;

bool is_number(const std::string& text) {
  return !text.empty() && text.size() <= 10 &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A number below (id_t)-1, which the kernel reserves for "none".
std::optional<unsigned> small_number(const std::string& text) {
  const unsigned long long value = std::stoull(text);
  if (value > 0xfffffffeull) return std::nullopt;
  return static_cast<unsigned>(value);
}

bool plausible_name(const std::string& name) {
  return !name.empty() && name.size() <= 256 && name.find('\0') == std::string::npos;
}

}  // namespace

std::optional<uid_t> resolve_user(const std::string& user) {
  if (is_number(user)) return small_number(user);
  if (!plausible_name(user)) return std::nullopt;
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(kBufferBytes);
  if (getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return found->pw_uid;
}

std::optional<gid_t> resolve_group(const std::string& group) {
  if (is_number(group)) return small_number(group);
  if (!plausible_name(group)) return std::nullopt;
  struct group entry {};
  struct group* found = nullptr;
  std::vector<char> buffer(kBufferBytes);
  if (getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return found->gr_gid;
}

std::vector<gid_t> groups_of_user(uid_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(kBufferBytes);
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) return {};
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 8; ++attempt) {
    int count = static_cast<int>(groups.size());
    if (getgrouplist(found->pw_name, found->pw_gid, groups.data(), &count) >= 0) {
      groups.resize(static_cast<std::size_t>(count));
      return groups;
    }
    groups.resize(static_cast<std::size_t>(count) > groups.size() ? static_cast<std::size_t>(count)
                                                                   : groups.size() * 2);
  }
  return {found->pw_gid};
}

}  // namespace gpureap
