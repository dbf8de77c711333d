// The one mountinfo parser (src/proc/mountinfo): escapes undone, optional fields skipped,
// garbage refused. Used by the kill engine's cgroup2 lookup and doctor's blocked I/O.
#include <gtest/gtest.h>

#include "proc/mountinfo.hpp"

namespace gpureap {
namespace {

TEST(Mountinfo, FieldsWithOptionalTagsAndEscapes) {
  const auto mount = parse_mountinfo_line(
      "36 35 98:0 /mnt\\040data /srv/my\\040cgroup rw,noatime master:1 shared:7 - cgroup2 none\\011x rw");
  ASSERT_TRUE(mount.has_value());
  EXPECT_EQ(mount->root, "/mnt data");
  EXPECT_EQ(mount->mount_point, "/srv/my cgroup");
  EXPECT_EQ(mount->fs_type, "cgroup2");
  EXPECT_EQ(mount->source, "none\tx");
}

TEST(Mountinfo, NotAMountinfoLineIsRefused) {
  EXPECT_FALSE(parse_mountinfo_line("").has_value());
  EXPECT_FALSE(parse_mountinfo_line("36 35 98:0 / /mnt rw no-separator").has_value());
  EXPECT_FALSE(parse_mountinfo_line("36 35 98:0 / relative rw - ext4 /dev/sda1 rw").has_value());
  EXPECT_FALSE(parse_mountinfo_line("36 35 98:0 / /mnt rw -").has_value());
}

TEST(Mountinfo, WholeFileKeepsValidLinesInOrder) {
  const auto mounts = parse_mountinfo(
      "22 1 0:21 / /sys rw - sysfs sysfs rw\n"
      "garbage\n"
      "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[1].mount_point, "/sys/fs/cgroup/unified");
  EXPECT_EQ(unescape_mount_field("a\\134b\\012"), "a\\b\n");
  EXPECT_EQ(unescape_mount_field("\\04"), "\\04") << "an incomplete escape stays as it is";
}

}  // namespace
}  // namespace gpureap
