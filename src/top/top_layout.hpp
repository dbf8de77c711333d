// What `top` shows, as lines of styled text fitted to a width and height: the title, notices
// (no driver, read-only, not root, ...), a header per GPU (memory bar with unattributed memory
// in a glyph of its own, utilization, temperature, power, fan, performance state, history),
// the process table, and either the status line or an overlay (the kill plan, the doctor, the
// help). The ncurses screen and `--once` only paint it; nothing here touches a terminal.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "top/top_state.hpp"

namespace gpureap {

// How a span reads: colour only adds to it (every tone is also legible without colour).
enum class Tone { Normal, Strong, Dim, Good, Warn, Bad, Unattributed };

struct Span {
  std::string text;  // sanitised; fits the line it is in
  Tone tone = Tone::Normal;
};

struct FrameLine {
  std::vector<Span> spans;
  bool highlighted = false;  // the cursor's row: shown in reverse video
};

struct Frame {
  std::vector<FrameLine> lines;
  int table_top = -1;         // line of the first table row shown; -1: no table (an overlay)
  std::size_t first_row = 0;  // its index in TopState::shown
  std::size_t rows_shown = 0;
};

struct LayoutOptions {
  std::size_t width = 80;
  std::optional<std::size_t> height;  // none: every row and no status line (--once)
  bool ascii = false;                 // no UTF-8 glyphs (the locale is not UTF-8)
  double interval_s = 1;
};

// How many table rows fit (what PageUp/PageDown move by).
std::size_t table_capacity(const TopState& state, const LayoutOptions& options);

Frame layout_frame(const TopState& state, const LayoutOptions& options);

// The frame as plain text, one '\n'-terminated line each, trailing spaces removed (--once
// through a pipe, and the tests).
std::string frame_text(const Frame& frame);

// A GPU's memory bar of `cells`: attributed use, unattributed use (its own glyph), free.
std::vector<Span> memory_bar(const GpuView& gpu, std::size_t cells, bool ascii);

}  // namespace gpureap
