// gpusim_tests entry point. The tests spawn gpusim-cuda, whose workers outlive their parent on
// purpose; as a child subreaper this process inherits and can reap them.
#include <gtest/gtest.h>
#include <sys/prctl.h>

int main(int argc, char** argv) {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
