#include "common/host_pid.hpp"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace gpusim {

ssize_t read_host_pid_link(char* buffer, std::size_t size) {
  const char* host_proc = std::getenv("GPUSIM_HOST_PROC");
  char path[256] = "/proc/self";
  if (host_proc != nullptr && host_proc[0] == '/') {
    const int n = std::snprintf(path, sizeof path, "%s/self", host_proc);
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof path) {
      errno = ENAMETOOLONG;
      return -1;
    }
  }
  return ::readlink(path, buffer, size);
}

pid_t host_pid() {
  char buf[32];
  const ssize_t n = read_host_pid_link(buf, sizeof buf);
  if (n <= 0) return 0;
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(buf, buf + n, pid);
  return ec == std::errc() && end == buf + n ? pid : 0;
}

}  // namespace gpusim
