#include "tmux_screen.hpp"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

constexpr const char* kTmux = "/usr/bin/tmux";
std::atomic<int> g_sessions{0};

}  // namespace

bool TmuxScreen::available() { return access(kTmux, X_OK) == 0; }

TmuxScreen::TmuxScreen(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                       int columns, int rows, const std::string& scratch_dir) {
  const std::string base = scratch_dir + "/tmux-" + std::to_string(getpid()) + "-" + std::to_string(g_sessions++);
  socket_ = base + ".sock";
  config_ = base + ".conf";
  status_file_ = base + ".status";
  // No status bar: the window is the program's alone.
  std::ofstream(config_) << "set -g status off\n";
  std::vector<std::string> args = {"new-session", "-d", "-s", "top", "-x", std::to_string(columns), "-y",
                                   std::to_string(rows)};
  for (const auto& [name, value] : env) {
    args.push_back("-e");
    args.push_back(name + "=" + value);
  }
  // The program's exit status is written by a shell that waits for it (tmux 3.3 can miss the
  // SIGCHLD of a pane's program and never learn it). The script is constant; the program and
  // its arguments reach it as "$@", never as text to parse.
  args.insert(args.end(), {"--", "/bin/sh", "-c", "\"$@\"; echo $? > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"", status_file_});
  args.insert(args.end(), argv.begin(), argv.end());
  const auto result = run_command(tmux(args));
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

TmuxScreen::~TmuxScreen() {
  run_command(tmux({"kill-server"}));
  for (const auto& path : {socket_, config_, status_file_}) unlink(path.c_str());
}

void TmuxScreen::hang_up() const { run_command(tmux({"kill-server"})); }

std::vector<std::string> TmuxScreen::tmux(std::vector<std::string> args) const {
  args.insert(args.begin(), {kTmux, "-S", socket_, "-f", config_});
  return args;
}

std::string TmuxScreen::run(const std::vector<std::string>& args) const { return run_command(tmux(args)).out; }

std::string TmuxScreen::text() const { return run({"capture-pane", "-p", "-t", "top"}); }

std::vector<std::string> TmuxScreen::lines() const {
  std::vector<std::string> out;
  std::istringstream in(text());
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool TmuxScreen::wait_until(const std::function<bool(const std::string&)>& ready, int timeout_ms) const {
  return eventually([&] { return ready(text()); }, timeout_ms);
}

bool TmuxScreen::wait_for(const std::string& needle, int timeout_ms) const {
  return wait_until([&](const std::string& screen) { return screen.find(needle) != std::string::npos; }, timeout_ms);
}

void TmuxScreen::keys(const std::vector<std::string>& names) const {
  std::vector<std::string> args = {"send-keys", "-t", "top"};
  args.insert(args.end(), names.begin(), names.end());
  run(args);
}

void TmuxScreen::type(const std::string& literal) const { run({"send-keys", "-t", "top", "-l", literal}); }

void TmuxScreen::resize(int columns, int rows) const {
  run({"resize-window", "-t", "top", "-x", std::to_string(columns), "-y", std::to_string(rows)});
}

std::string TmuxScreen::title() const {
  std::string t = run({"display-message", "-p", "-t", "top", "#{pane_title}"});
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t;
}

std::optional<int> TmuxScreen::wait_exit(int timeout_ms) const {
  std::optional<int> status;
  eventually(
      [&] {
        std::ifstream in(status_file_);
        int code = -1;
        if (in >> code) status = code;
        return status.has_value();
      },
      timeout_ms);
  return status;
}

std::string line_with(const std::string& screen, const std::string& needle) {
  std::istringstream in(screen);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return {};
}

}  // namespace gpureap::test
