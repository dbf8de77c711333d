// The keys of `top` as a state machine over TopState's mode: what each key does in each mode,
// and what the loop must do about it (quit, ask the worker for a plan, carry it out, ask the
// doctor). Mouse clicks arrive as keys too, already turned into a row by the screen.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "top/kill_preview.hpp"
#include "top/top_state.hpp"

namespace gpureap {

struct Key {
  enum class Kind { Char, Up, Down, PageUp, PageDown, Home, End, Enter, Escape, Backspace, Delete, F9, Click, WheelUp, WheelDown };
  Kind kind = Kind::Char;
  char32_t ch = 0;              // Kind::Char
  std::optional<std::size_t> row;  // Kind::Click: the index in TopState::shown clicked on
};

struct KeyAction {
  enum class Kind { None, Quit, Plan, Execute, Discard, Doctor };
  Kind kind = Kind::None;
  std::vector<ProcessKey> chosen;  // Plan
  Ladder ladder = Ladder::TermThenKill;  // Execute
  std::optional<unsigned> gpu;     // Doctor
};

// `page` is how many rows the table shows (PageUp/PageDown).
KeyAction handle_key(TopState& state, const Key& key, std::size_t page);

// What `?` shows: keys (or glyphs) and what they do.
std::vector<std::pair<std::string, std::string>> help_entries(double timeout_s);

}  // namespace gpureap
