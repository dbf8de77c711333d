// A program on a terminal a person could be looking at: a detached tmux session of its own
// (a private server whose socket is in the test's scratch directory), whose screen the test reads with capture-pane and types into with
// send-keys. Waits poll the pane until the text appears or a deadline passes.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpureap::test {

class TmuxScreen {
 public:
  // Runs argv (no shell) in a window of columns x rows, with env added to the server's.
  TmuxScreen(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env, int columns,
             int rows, const std::string& scratch_dir);
  ~TmuxScreen();  // ends the server and the program with it
  TmuxScreen(const TmuxScreen&) = delete;
  TmuxScreen& operator=(const TmuxScreen&) = delete;

  static bool available();  // tmux is installed

  std::string text() const;              // the screen, one line each, trailing spaces dropped
  std::vector<std::string> lines() const;
  // Polls the screen until `ready` holds for it (or `text` appears); false at the deadline.
  bool wait_until(const std::function<bool(const std::string&)>& ready, int timeout_ms = 8000) const;
  bool wait_for(const std::string& needle, int timeout_ms = 8000) const;
  void keys(const std::vector<std::string>& names) const;  // tmux key names: Enter, Escape, Space, Down, K
  void type(const std::string& literal) const;             // sent as typed
  void resize(int columns, int rows) const;
  std::string title() const;  // the pane's title (what an escape sequence could set)
  // The program's exit status once it has ended (128 + signal when one ended it), polled up to
  // the deadline.
  std::optional<int> wait_exit(int timeout_ms = 8000) const;
  // Closes the terminal: the server ends, the pane's pseudo-terminal hangs up (its session
  // leader gets SIGHUP; a program in a session of its own only sees its input end).
  void hang_up() const;

 private:
  std::vector<std::string> tmux(std::vector<std::string> args) const;
  std::string run(const std::vector<std::string>& args) const;

  std::string socket_;       // the private server's, in the scratch directory
  std::string config_;
  std::string status_file_;  // the program's exit status, once it has ended
};

// The line holding `needle`, or "" when none does.
std::string line_with(const std::string& screen, const std::string& needle);

}  // namespace gpureap::test
