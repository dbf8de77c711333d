#include "cli/common/terminal_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "proc/proc_io.hpp"
#include "text/charset.hpp"
#include "text/sanitize.hpp"

namespace gpureap {

void say_on_stderr(std::string_view command, const std::string& line) {
  const std::string text = in_charset(std::string(command) + ": " + sanitize_for_terminal(line) + "\n", terminal_charset());
  std::fputs(text.c_str(), stderr);
}

void add_color_option(CLI::App* command, std::string& color) {
  command->add_option("--color", color, "Colour: auto (default; honours NO_COLOR), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
}
namespace {

// One line from the terminal, at most 64 bytes kept; "" on end of file or error.
std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (true) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') break;
    if (line.size() < 64) line.push_back(c);
  }
  return line;
}

}  // namespace

void write_out(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void write_text(const std::string& text) { write_out(in_charset(text, terminal_charset())); }

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

Answer ask_on_terminal(std::string_view shown_first, std::string_view question) {
  const int tty = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (tty < 0) return Answer::NoTerminal;
  std::fflush(stdout);
  std::fflush(stderr);
  std::string prompt(shown_first);
  prompt.append(question).append(" [y/N] ");
  prompt = in_charset(prompt, terminal_charset());
  Answer answer = Answer::No;
  if (procfs::write_all(tty, prompt) == 0) {
    const std::string line = read_line(tty);
    if (!line.empty() && (line[0] == 'y' || line[0] == 'Y')) answer = Answer::Yes;
  }
  ::close(tty);
  return answer;
}

}  // namespace gpureap
