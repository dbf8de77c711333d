#include "spawn/debugger_commands.hpp"

namespace gpureap {

bool looks_like_python(const std::string& exe_basename) { return exe_basename.rfind("python", 0) == 0; }

std::vector<std::string> py_spy_command(pid_t pid, bool nonblocking) {
  std::vector<std::string> argv = {"py-spy", "dump", "--pid", std::to_string(pid)};
  if (nonblocking) argv.push_back("--nonblocking");
  return argv;
}

std::vector<std::string> gdb_command(pid_t pid) {
  return {"gdb", "-p", std::to_string(pid), "-batch", "-ex", "thread apply all bt"};
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& word : argv) {
    if (!out.empty()) out += ' ';
    out += word.find(' ') == std::string::npos ? word : "'" + word + "'";
  }
  return out;
}

}  // namespace gpureap
