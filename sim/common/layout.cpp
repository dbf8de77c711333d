#include "common/layout.hpp"

#include <cstdlib>

namespace gpusim {

std::optional<std::string> state_dir_from_env() {
  const char* v = std::getenv(kStateDirEnv);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace gpusim
