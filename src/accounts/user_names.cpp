#include "accounts/user_names.hpp"

#include <cerrno>
#include <memory>

#include <pwd.h>
#include <unistd.h>

namespace gpureap {
namespace {

std::string look_up(uid_t uid) {
  const long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::size_t size = hint > 0 ? static_cast<std::size_t>(hint) : 1024;
  constexpr std::size_t kMaxSize = 1 << 20;
  for (;;) {
    auto buffer = std::make_unique<char[]>(size);
    passwd entry{};
    passwd* result = nullptr;
    const int error = getpwuid_r(uid, &entry, buffer.get(), size, &result);
    if (error == ERANGE && size < kMaxSize) {
      size *= 2;
      continue;
    }
    if (error == 0 && result != nullptr && result->pw_name != nullptr && result->pw_name[0] != '\0') {
      return result->pw_name;
    }
    return std::to_string(uid);
  }
}

}  // namespace

const std::string& UserNames::name(uid_t uid) {
  auto it = cache_.find(uid);
  if (it == cache_.end()) it = cache_.emplace(uid, look_up(uid)).first;
  return it->second;
}

}  // namespace gpureap
