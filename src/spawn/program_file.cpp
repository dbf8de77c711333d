#include "spawn/program_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace gpureap {
namespace {

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string find_executable(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return name.front() == '/' && executable_file(name) ? name : std::string();
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (;;) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    if (!dir.empty() && dir.front() == '/') {
      std::string candidate = std::string(dir) + "/" + name;
      if (executable_file(candidate)) return candidate;
    }
    if (colon == std::string_view::npos) return {};
    rest.remove_prefix(colon + 1);
  }
}

std::string program_file_problem(int fd, const std::string& name) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fmt::format("{}: {}", name, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fmt::format("{} is not a regular file", name);
  if ((st.st_mode & 0111) == 0) return fmt::format("{}: {}", name, std::strerror(EACCES));
  return {};
}

procfs::unique_fd open_program(const std::string& path, std::string& why) {
  procfs::unique_fd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!fd) {
    why = fmt::format("{}: {}", path, std::strerror(errno));
    return fd;
  }
  why = program_file_problem(fd.get(), path);
  return why.empty() ? std::move(fd) : procfs::unique_fd();
}

}  // namespace gpureap
