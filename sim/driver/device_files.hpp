// The device files the library holds open, as the real libnvidia-ml.so.1 does: nvidiactl from
// the first nvmlInit* until the last nvmlShutdown, and /dev/nvidia<minor> from the moment a
// handle to that GPU is first handed out. fuser and lsof (and gpureap) therefore see every NVML
// client (nvidia-smi, an exporter, DCGM) as a holder of the GPUs it looked at.
#pragma once

#include <map>
#include <string>

#include "sim_nvml_abi.hpp"

namespace gpusim::driver {

class DeviceFiles {
 public:
  DeviceFiles() = default;
  DeviceFiles(const DeviceFiles&) = delete;
  DeviceFiles& operator=(const DeviceFiles&) = delete;
  ~DeviceFiles() { close_all(); }

  // nvidiactl, at the first init. A missing node is a library without its kernel driver.
  nvmlReturn_t open_control(const std::string& path);
  // A GPU's node; opened once, later calls for the same path are no-ops.
  nvmlReturn_t open_gpu(const std::string& path);
  // At the last shutdown.
  void close_all();

 private:
  nvmlReturn_t open_once(const std::string& path, nvmlReturn_t if_missing);
  std::map<std::string, int> fds_;
};

}  // namespace gpusim::driver
