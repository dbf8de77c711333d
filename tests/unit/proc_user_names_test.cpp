#include "accounts/user_names.hpp"

#include <gtest/gtest.h>

#include <pwd.h>
#include <unistd.h>

namespace gpureap {
namespace {

TEST(ProcUserNames, KnownUidsGetTheirAccountName) {
  UserNames names;
  EXPECT_EQ(names.name(0), "root");
  const passwd* self = getpwuid(getuid());
  if (self != nullptr) {
    EXPECT_EQ(names.name(getuid()), self->pw_name);
  }
}

TEST(ProcUserNames, UnknownUidsFallBackToTheNumber) {
  UserNames names;
  // Container uids seen from the host (user namespaces map to 100000+) rarely have accounts.
  for (const uid_t uid : {3999999999u, 4294967294u, 123456789u}) {
    if (getpwuid(uid) != nullptr) continue;
    EXPECT_EQ(names.name(uid), std::to_string(uid));
  }
}

TEST(ProcUserNames, LooksUpEachUidOnce) {
  UserNames names;
  const std::string& first = names.name(0);
  const std::string& again = names.name(0);
  EXPECT_EQ(&first, &again);
}

}  // namespace
}  // namespace gpureap
