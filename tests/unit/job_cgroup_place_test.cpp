// Where `gpureap run` may create its job's cgroup: cgroup_not_ours_reason over a directory tree
// standing for the cgroup v2 mount, with systemd's delegation mark set as an extended attribute.
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "job/job_cgroup.hpp"

namespace gpureap::job {
namespace {

// A cgroup tree's shape in a scratch directory: a service and an ssh session's scope.
class CgroupPlace : public ::testing::Test {
 protected:
  CgroupPlace()
      : mount_(std::filesystem::temp_directory_path() /
               ("gpureap-cgroup-place-" + std::to_string(getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::create_directories(mount_ + "/system.slice/job.service/payload");
    std::filesystem::create_directories(mount_ + "/user.slice/user-1000.slice/session-3.scope");
  }
  ~CgroupPlace() override { std::filesystem::remove_all(mount_); }
  std::string mount_;
};

TEST_F(CgroupPlace, AnUndelegatedUnitIsSystemdsAndAPlainTreeIsNot) {
  const std::string session = cgroup_not_ours_reason(mount_, "/user.slice/user-1000.slice/session-3.scope", false);
  EXPECT_NE(session.find("session-3.scope, which was not delegated"), std::string::npos) << session;
  // No unit on the way up: systemd's only on a host it booted.
  EXPECT_EQ(cgroup_not_ours_reason(mount_, "/", false), "");
  EXPECT_NE(cgroup_not_ours_reason(mount_, "/", true), "");
  EXPECT_EQ(cgroup_not_ours_reason(mount_, "/container-job", false), "");
}

TEST_F(CgroupPlace, TheNearestUnitsDelegationMarkDecides) {
  const std::string service = mount_ + "/system.slice/job.service";
  // user.* works for any owner; trusted.* needs CAP_SYS_ADMIN. Either is systemd's mark.
  if (setxattr(service.c_str(), "user.delegate", "1", 1, 0) != 0 &&
      setxattr(service.c_str(), "trusted.delegate", "1", 1, 0) != 0) {
    GTEST_SKIP() << "this filesystem takes no user or trusted xattrs: " << std::strerror(errno);
  }
  EXPECT_EQ(cgroup_not_ours_reason(mount_, "/system.slice/job.service", true), "");
  EXPECT_EQ(cgroup_not_ours_reason(mount_, "/system.slice/job.service/payload", true), "");
  // The mark on the service says nothing of its slice.
  EXPECT_NE(cgroup_not_ours_reason(mount_, "/system.slice", false), "");
}

}  // namespace
}  // namespace gpureap::job
