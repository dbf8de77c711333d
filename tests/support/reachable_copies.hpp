// Programs and libraries of this build that a test runs as another user (the test user), at
// paths that user can reach. A checkout only root can enter (a clone in /root, mode 0700) hides
// the build tree from every other user: exec fails, dlopen says "Permission denied". The files
// are then copied, once per build, into a directory only root may write and everyone may enter
// (<stage_root>/<hash of the files' identities>/, stage_root e.g. /run/gpureap-test-<hash of the
// build path>); a lock on stage_root and a rename of the finished copy into place let parallel
// test processes share one copy and never see half of one. ctest's fixture test_user_copies
// removes stage_root after the last test (tests/CMakeLists.txt).
// Plain C++ and POSIX, no test framework: the simulator's tests use it too.
#pragma once

#include <string>
#include <vector>

namespace gpureap::test {

struct ReachableCopies {
  std::string build_dir;           // every file below is under it
  std::string stage_root;          // where copies go when the build tree is out of reach
  std::vector<std::string> files;  // absolute paths: what tests may run or load as another user
};

// `path` where a user other than root can exec or read it: the path itself when every
// directory above it lets others in (or the tests do not run as root, so no other user is
// involved), otherwise its copy. A path that is not one of build.files comes back unchanged.
// Throws std::runtime_error when the copy cannot be made.
std::string reachable_by_other_users(const ReachableCopies& build, const std::string& path);

}  // namespace gpureap::test
