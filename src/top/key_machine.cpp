#include "top/key_machine.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

void move_cursor(TopState& state, long delta) {
  if (state.shown.empty()) return;
  const long last = static_cast<long>(state.shown.size()) - 1;
  state.cursor = static_cast<std::size_t>(std::clamp(static_cast<long>(state.cursor) + delta, 0L, last));
}

// Arrows, j/k, pages, Home/End, the wheel and clicks: the same in every mode that has a cursor.
bool navigate(TopState& state, const Key& key, std::size_t page) {
  const long step = static_cast<long>(std::max<std::size_t>(page, 1));
  switch (key.kind) {
    case Key::Kind::Up: case Key::Kind::WheelUp: move_cursor(state, -1); return true;
    case Key::Kind::Down: case Key::Kind::WheelDown: move_cursor(state, 1); return true;
    case Key::Kind::PageUp: move_cursor(state, -step); return true;
    case Key::Kind::PageDown: move_cursor(state, step); return true;
    case Key::Kind::Home: state.cursor = 0; return true;
    case Key::Kind::End: move_cursor(state, static_cast<long>(state.shown.size())); return true;
    case Key::Kind::Click:
      if (key.row && *key.row < state.shown.size()) state.cursor = *key.row;
      return true;
    case Key::Kind::Char:
      if (key.ch != 'j' && key.ch != 'k') return false;
      move_cursor(state, key.ch == 'j' ? 1 : -1);
      return true;
    default: return false;
  }
}

// The GPUs `g` steps through: every one the driver reported, then all of them again.
std::optional<unsigned> next_gpu(const TopState& state) {
  std::vector<unsigned> gpus;
  if (state.snapshot) {
    for (const auto& g : state.snapshot->gpus) gpus.push_back(g.reading.index);
  }
  if (gpus.empty()) return std::nullopt;
  if (!state.order.gpu) return gpus.front();
  const auto it = std::upper_bound(gpus.begin(), gpus.end(), *state.order.gpu);
  if (it == gpus.end()) return std::nullopt;
  return *it;
}

KeyAction begin_kill(TopState& state) {
  if (state.readonly) {
    state.set_status("read-only view (--readonly): nothing can be signalled from here", StatusTone::Bad);
    return {};
  }
  if (state.kill_running) {
    state.set_status("a kill is still in progress: wait for its outcome", StatusTone::Busy);
    return {};
  }
  KeyAction action;
  action.kind = KeyAction::Kind::Plan;
  if (!state.tags.empty()) {
    action.chosen.assign(state.tags.begin(), state.tags.end());
  } else if (const DisplayRow* row = state.current(); row != nullptr && !row->placeholder) {
    action.chosen.push_back(row->row.key);
  } else {
    state.set_status("nothing to end: select a row, or tag rows with space", StatusTone::Bad);
    return {};
  }
  state.mode = Mode::Planning;
  state.set_status(fmt::format("planning the end of {} chosen process{}: reading every process…", action.chosen.size(),
                               action.chosen.size() == 1 ? "" : "es"),
                   StatusTone::Busy);
  return action;
}

KeyAction browse(TopState& state, const Key& key, std::size_t page) {
  if (navigate(state, key, page)) return {};
  if (key.kind == Key::Kind::Delete || key.kind == Key::Kind::F9) return begin_kill(state);
  if (key.kind == Key::Kind::Escape) {
    state.set_status("", StatusTone::Info);
    return {};
  }
  if (key.kind != Key::Kind::Char) return {};
  switch (key.ch) {
    case 'q': state.quit = true; return {KeyAction::Kind::Quit, {}, {}, {}};
    case ' ':
      if (const DisplayRow* row = state.current(); row != nullptr && !row->placeholder) {
        if (!state.tags.erase(row->row.key)) state.tags.insert(row->row.key);
        move_cursor(state, 1);
      }
      return {};
    case 'U': state.tags.clear(); return {};
    case 't': state.order.tree = !state.order.tree; reorder(state); return {};
    case 's': state.order.sort = next_sort_key(state.order.sort); reorder(state); return {};
    case 'M': state.order.sort = SortKey::Memory; reorder(state); return {};
    case 'C': state.order.sort = SortKey::Cpu; reorder(state); return {};
    case 'A': state.order.sort = SortKey::Age; reorder(state); return {};
    case 'P': state.order.sort = SortKey::Pid; reorder(state); return {};
    case 'g': state.order.gpu = next_gpu(state); reorder(state); return {};
    case '/':
      state.mode = Mode::Filter;
      state.filter_before = state.order.filter;
      return {};
    case '?': state.mode = Mode::Help; return {};
    case 'K': case 'x': return begin_kill(state);
    case 'd': {
      KeyAction action;
      action.kind = KeyAction::Kind::Doctor;
      const DisplayRow* row = state.current();
      action.gpu = row != nullptr && row->row.gpu ? row->row.gpu : state.order.gpu;
      state.mode = Mode::Doctor;
      state.doctor.reset();
      state.doctor_gpu = action.gpu;
      return action;
    }
    default: return {};
  }
}

KeyAction filter(TopState& state, const Key& key) {
  switch (key.kind) {
    case Key::Kind::Enter: state.mode = Mode::Browse; return {};
    case Key::Kind::Escape:
      state.order.filter = state.filter_before;
      state.mode = Mode::Browse;
      reorder(state);
      return {};
    case Key::Kind::Backspace:
      if (!state.order.filter.empty()) {
        // One UTF-8 character: its continuation bytes, then its first byte.
        while (!state.order.filter.empty() && (static_cast<unsigned char>(state.order.filter.back()) & 0xC0) == 0x80) {
          state.order.filter.pop_back();
        }
        if (!state.order.filter.empty()) state.order.filter.pop_back();
        reorder(state);
      }
      return {};
    case Key::Kind::Char: {
      if (key.ch < 0x20 || key.ch == 0x7F || state.order.filter.size() >= 64) return {};
      // Typed text is shown back: kept only when it is plain printable text after sanitising.
      std::string typed;
      const char32_t c = key.ch;
      if (c < 0x80) {
        typed = static_cast<char>(c);
      } else if (c < 0x800) {
        typed = {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
      } else if (c < 0x10000) {
        typed = {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
                 static_cast<char>(0x80 | (c & 0x3F))};
      } else {
        return {};
      }
      if (sanitize_for_terminal(typed) != typed) return {};
      state.order.filter += typed;
      reorder(state);
      return {};
    }
    default: return {};
  }
}

KeyAction confirm(TopState& state, const Key& key) {
  const bool cancel = key.kind == Key::Kind::Escape ||
                      (key.kind == Key::Kind::Char && (key.ch == 'n' || key.ch == 'q'));
  if (cancel) {
    state.mode = Mode::Browse;
    state.preview.reset();
    state.set_status("cancelled: nothing was signalled", StatusTone::Info);
    return {KeyAction::Kind::Discard, {}, {}, {}};
  }
  std::optional<Ladder> ladder;
  if (key.kind == Key::Kind::Enter) ladder = Ladder::TermThenKill;
  if (key.kind == Key::Kind::Char) {
    if (key.ch == 'l') ladder = Ladder::TermThenKill;
    if (key.ch == 't') ladder = Ladder::TermOnly;
    if (key.ch == 'i') ladder = Ladder::IntOnly;
    if (key.ch == '9') ladder = Ladder::KillNow;
  }
  if (!ladder) return {};
  if (!state.preview || !state.preview->anything_to_signal()) {
    state.set_status("nothing in this plan can be signalled: Esc to go back", StatusTone::Bad);
    return {};
  }
  const std::size_t count = state.preview->signalled.size();
  state.mode = Mode::Browse;
  state.preview.reset();
  state.kill_running = true;
  state.set_status(fmt::format("ending {} process{} ({})… the screen keeps refreshing", count, count == 1 ? "" : "es",
                               ladder_words(*ladder, state.ladder_timeout_s)),
                   StatusTone::Busy);
  KeyAction action;
  action.kind = KeyAction::Kind::Execute;
  action.ladder = *ladder;
  return action;
}

}  // namespace

KeyAction handle_key(TopState& state, const Key& key, std::size_t page) {
  switch (state.mode) {
    case Mode::Browse: return browse(state, key, page);
    case Mode::Filter: return filter(state, key);
    case Mode::Planning: navigate(state, key, page); return {};
    case Mode::Confirm: return confirm(state, key);
    case Mode::Help: state.mode = Mode::Browse; return {};
    case Mode::Doctor:
      if (key.kind == Key::Kind::Up || (key.kind == Key::Kind::Char && key.ch == 'k')) {
        if (state.doctor_scroll > 0) --state.doctor_scroll;
      } else if (key.kind == Key::Kind::Down || (key.kind == Key::Kind::Char && key.ch == 'j')) {
        ++state.doctor_scroll;
      } else {
        state.mode = Mode::Browse;
      }
      return {};
  }
  return {};
}

std::vector<std::pair<std::string, std::string>> help_entries(double timeout_s) {
  return {
      {"↑ ↓ j k", "move; PgUp PgDn Home End; the mouse selects and scrolls"},
      {"space", "tag or untag the process; U untags all"},
      {"K x Del F9", "end the tagged processes, or the selected one, after showing kill's plan: then Enter or l: " +
                         ladder_words(Ladder::TermThenKill, timeout_s) +
                         " · t: SIGTERM only · i: SIGINT only · 9: SIGKILL now · Esc: cancel"},
      {"", "workers holding the GPU go with their process; the driver confirms the memory came back"},
      {"t", "tree: workers under their process, orphans under their dead owner"},
      {"s M C A P", "next sort; by memory, CPU, age, PID"},
      {"/", "filter: rows whose PID, user, container, role or command contain the text"},
      {"g", "one GPU after the other, then all"},
      {"d", "the doctor's findings for the selected row's GPU"},
      {"q ?", "quit; this help"},
      {"█ ▒ ░", "memory used by listed processes; used, but no listed process explains it; free"},
      {"* ✗", "tagged; not yours to end (another user's, protected, foreign)"},
      {"roles", "worker of N · orphan of PID N (its job is over) · gone (exited, its memory kept by its "
                "holders) · foreign (not in this PID namespace) · mismatch (the PID here is another "
                "process) · client (NVML, no memory)"},
  };
}

}  // namespace gpureap
