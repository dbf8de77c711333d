// The terminal side of `gpureap top`, the one place that uses ncurses: paints a Frame (the
// layout decides every character; text arrives sanitised and fitted), reads keys and mouse
// events as top's Keys, and follows the window's size. Colour only when wanted (NO_COLOR,
// --color) and the terminal has it; every tone also reads without it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <wchar.h>

#include "top/key_machine.hpp"
#include "top/top_layout.hpp"

namespace gpureap {

class TopScreen {
 public:
  // Takes over the terminal on stdin/stdout; null with `error` set when it cannot.
  static std::unique_ptr<TopScreen> open(bool color, std::string& error);
  ~TopScreen();  // gives the terminal back as it was
  TopScreen(const TopScreen&) = delete;
  TopScreen& operator=(const TopScreen&) = delete;

  std::size_t width() const;
  std::size_t height() const;
  bool ascii() const { return ascii_; }  // the locale is not UTF-8: no block glyphs
  void follow_resize();                  // after SIGWINCH: the window's new size
  void paint(const Frame& frame);
  // The next key typed, or none when nothing is waiting. A click becomes the row under it in
  // the last frame painted.
  std::optional<Key> read_key();

 private:
  TopScreen() = default;
  int attributes(Tone tone) const;
  Key character(wint_t c) const;
  std::optional<Key> function_key(wint_t c) const;  // none: not a key top uses

  void* screen_ = nullptr;  // SCREEN*
  bool color_ = false;
  bool ascii_ = false;
  Frame last_;
};

}  // namespace gpureap
