// User names for uids, looked up once each through the system's user database.
#pragma once

#include <string>
#include <unordered_map>

#include <sys/types.h>

namespace gpureap {

class UserNames {
 public:
  // The account name for uid (getpwuid_r: /etc/passwd, LDAP, ... per nsswitch.conf), or the
  // uid as decimal text when no account has it (common for container uids seen from the host).
  const std::string& name(uid_t uid);

 private:
  std::unordered_map<uid_t, std::string> cache_;
};

}  // namespace gpureap
