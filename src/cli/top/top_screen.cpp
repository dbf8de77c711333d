#include "cli/top/top_screen.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include <curses.h>

#include "text/charset.hpp"

namespace gpureap {
namespace {

enum Pair : short { kGood = 1, kWarn, kBad, kUnattributed };

}  // namespace

std::unique_ptr<TopScreen> TopScreen::open(bool color, std::string& error) {
  std::unique_ptr<TopScreen> screen(new TopScreen());
  // newterm, not initscr: initscr ends the program on a terminal it does not know.
  SCREEN* s = newterm(nullptr, stdout, stdin);
  if (s == nullptr) {
    const char* term = std::getenv("TERM");
    error = std::string("cannot drive this terminal (TERM=") + (term ? term : "unset") +
            "): use --once for plain output";
    return nullptr;
  }
  screen->screen_ = s;
  screen->ascii_ = terminal_charset() == Charset::Ascii;
  cbreak();
  noecho();
  nonl();
  curs_set(0);
  keypad(stdscr, TRUE);
  nodelay(stdscr, TRUE);
  set_escdelay(25);  // Esc answers at once; an arrow's sequence arrives within a few ms
  mousemask(BUTTON1_PRESSED | BUTTON1_CLICKED | BUTTON4_PRESSED | BUTTON5_PRESSED, nullptr);
  mouseinterval(0);
  if (color && has_colors()) {
    start_color();
    use_default_colors();
    init_pair(kGood, COLOR_GREEN, -1);
    init_pair(kWarn, COLOR_YELLOW, -1);
    init_pair(kBad, COLOR_RED, -1);
    init_pair(kUnattributed, COLOR_MAGENTA, -1);
    screen->color_ = true;
  }
  return screen;
}

TopScreen::~TopScreen() {
  endwin();
  delscreen(static_cast<SCREEN*>(screen_));
}

std::size_t TopScreen::width() const { return COLS > 0 ? static_cast<std::size_t>(COLS) : 80; }
std::size_t TopScreen::height() const { return LINES > 0 ? static_cast<std::size_t>(LINES) : 24; }

void TopScreen::follow_resize() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > 0 && size.ws_col > 0) {
    resizeterm(size.ws_row, size.ws_col);
  }
}

int TopScreen::attributes(Tone tone) const {
  switch (tone) {
    case Tone::Normal: return A_NORMAL;
    case Tone::Strong: return A_BOLD;
    case Tone::Dim: return A_DIM;
    case Tone::Good: return color_ ? static_cast<int>(COLOR_PAIR(kGood)) : A_NORMAL;
    case Tone::Warn: return color_ ? static_cast<int>(COLOR_PAIR(kWarn)) : A_BOLD;
    case Tone::Bad: return color_ ? static_cast<int>(COLOR_PAIR(kBad) | A_BOLD) : A_BOLD;
    case Tone::Unattributed: return color_ ? static_cast<int>(COLOR_PAIR(kUnattributed)) : A_NORMAL;
  }
  return A_NORMAL;
}

void TopScreen::paint(const Frame& frame) {
  erase();
  const int rows = LINES, cols = COLS;
  for (int y = 0; y < rows && static_cast<std::size_t>(y) < frame.lines.size(); ++y) {
    const FrameLine& line = frame.lines[static_cast<std::size_t>(y)];
    const int reverse = line.highlighted ? A_REVERSE : 0;
    move(y, 0);
    for (const Span& span : line.spans) {
      attrset(attributes(span.tone) | reverse);
      addstr(in_charset(span.text, terminal_charset()).c_str());
    }
    if (line.highlighted) {
      attrset(A_REVERSE);
      int cy = 0, cx = 0;
      getyx(stdscr, cy, cx);
      if (cy == y) {
        for (int x = cx; x < cols; ++x) addch(' ');
      }
    }
  }
  attrset(A_NORMAL);
  refresh();
  last_ = frame;
}

std::optional<Key> TopScreen::read_key() {
  for (;;) {
    wint_t c = 0;
    const int kind = get_wch(&c);
    if (kind == ERR) return std::nullopt;
    if (kind != KEY_CODE_YES) return character(c);
    // KEY_RESIZE (queued by resizeterm: the resize was followed already) and keys top does not
    // use are no keys to act on: a help or doctor view stays open.
    if (auto key = function_key(c)) return key;
  }
}

Key TopScreen::character(wint_t c) const {
  Key key;
  if (c == '\n' || c == '\r') {
    key.kind = Key::Kind::Enter;
  } else if (c == 27) {
    key.kind = Key::Kind::Escape;
  } else if (c == 127 || c == 8) {
    key.kind = Key::Kind::Backspace;
  } else {
    key.ch = static_cast<char32_t>(c);
  }
  return key;
}

std::optional<Key> TopScreen::function_key(wint_t c) const {
  switch (c) {
    case KEY_UP: return Key{Key::Kind::Up, 0, std::nullopt};
    case KEY_DOWN: return Key{Key::Kind::Down, 0, std::nullopt};
    case KEY_PPAGE: return Key{Key::Kind::PageUp, 0, std::nullopt};
    case KEY_NPAGE: return Key{Key::Kind::PageDown, 0, std::nullopt};
    case KEY_HOME: return Key{Key::Kind::Home, 0, std::nullopt};
    case KEY_END: return Key{Key::Kind::End, 0, std::nullopt};
    case KEY_ENTER: return Key{Key::Kind::Enter, 0, std::nullopt};
    case KEY_BACKSPACE: return Key{Key::Kind::Backspace, 0, std::nullopt};
    case KEY_DC: return Key{Key::Kind::Delete, 0, std::nullopt};
    case KEY_MOUSE: {
      MEVENT event{};
      if (getmouse(&event) != OK) return std::nullopt;
      if (event.bstate & BUTTON4_PRESSED) return Key{Key::Kind::WheelUp, 0, std::nullopt};
      if (event.bstate & BUTTON5_PRESSED) return Key{Key::Kind::WheelDown, 0, std::nullopt};
      Key key{Key::Kind::Click, 0, std::nullopt};
      if (last_.table_top >= 0 && event.y >= last_.table_top &&
          static_cast<std::size_t>(event.y - last_.table_top) < last_.rows_shown) {
        key.row = last_.first_row + static_cast<std::size_t>(event.y - last_.table_top);
      }
      return key;
    }
    default:
      if (c == static_cast<wint_t>(KEY_F(9))) return Key{Key::Kind::F9, 0, std::nullopt};
      return std::nullopt;
  }
}

}  // namespace gpureap
