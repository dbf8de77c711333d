#include "cli/terminal_io.hpp"

#include <cstdio>

namespace gpureap {

void write_out(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

bool ask_yes_no(std::string_view question) {
  std::fwrite(question.data(), 1, question.size(), stderr);
  std::fputs(" [y/N] ", stderr);
  std::fflush(stderr);
  char line[64] = {0};
  if (std::fgets(line, sizeof line, stdin) == nullptr) return false;
  return line[0] == 'y' || line[0] == 'Y';
}

}  // namespace gpureap
