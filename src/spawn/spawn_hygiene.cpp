#include "spawn/spawn_hygiene.hpp"

#include <cerrno>

namespace gpureap {

int close_inherited_descriptors(posix_spawn_file_actions_t& actions) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  return posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#else
  (void)actions;
  return ENOSYS;  // an older C library: only close-on-exec descriptors are closed
#endif
}

}  // namespace gpureap
