#include "driver/device_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace gpusim::driver {

nvmlReturn_t DeviceFiles::open_once(const std::string& path, nvmlReturn_t if_missing) {
  if (fds_.count(path)) return NVML_SUCCESS;
  int fd;
  do {
    // O_CLOEXEC like the real library: an exec'd child is no NVML client, a fork()ed one is.
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == ENOENT) return if_missing;
    return errno == EACCES || errno == EPERM ? NVML_ERROR_NO_PERMISSION : NVML_ERROR_UNKNOWN;
  }
  fds_.emplace(path, fd);
  return NVML_SUCCESS;
}

nvmlReturn_t DeviceFiles::open_control(const std::string& path) {
  return open_once(path, NVML_ERROR_DRIVER_NOT_LOADED);
}

nvmlReturn_t DeviceFiles::open_gpu(const std::string& path) {
  return open_once(path, NVML_ERROR_UNKNOWN);
}

void DeviceFiles::close_all() {
  for (const auto& [path, fd] : fds_) ::close(fd);
  fds_.clear();
}

}  // namespace gpusim::driver
