#include "cuda/process_name.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace gpusim::cuda {

void adopt_process_name(const std::string& name, int argc, char** argv) {
  if (name.empty()) return;
  if (argc > 0 && name != argv[0]) {
    std::vector<char*> args(argv, argv + argc);
    args[0] = const_cast<char*>(name.c_str());
    args.push_back(nullptr);
    ::execv("/proc/self/exe", args.data());
    // Fall through: keep running under the old argv[0], with at least comm changed.
  }
  std::string base = name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
  ::prctl(PR_SET_NAME, base.substr(0, 15).c_str(), 0, 0, 0);
}

}  // namespace gpusim::cuda
