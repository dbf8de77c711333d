// One executable, two programs: what it does depends on the name it was started under.
#include <cstring>
#include <string>

#include "mps/mps.hpp"

int main(int argc, char** argv) {
  std::string self = argc > 0 ? argv[0] : "";
  auto slash = self.rfind('/');
  std::string name = slash == std::string::npos ? self : self.substr(slash + 1);
  if (name == "nvidia-cuda-mps-server") return gpusim::mps::server_main(argc, argv);
  return gpusim::mps::control_main(argc, argv);
}
