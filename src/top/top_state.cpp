#include "top/top_state.hpp"

#include <algorithm>

namespace gpureap {
namespace {

struct RowPlace {
  std::optional<unsigned> gpu;
  std::optional<std::size_t> drm_gpu;
  pid_t pid = 0;
};

std::optional<RowPlace> cursor_place(const TopState& state) {
  const DisplayRow* row = state.current();
  if (row == nullptr) return std::nullopt;
  return RowPlace{row->row.gpu, row->row.drm_gpu, row->row.pid()};
}

void restore_cursor(TopState& state, const std::optional<RowPlace>& place) {
  if (place) {
    for (std::size_t i = 0; i < state.shown.size(); ++i) {
      const TopRow& r = state.shown[i].row;
      if (r.pid() == place->pid && r.gpu == place->gpu && r.drm_gpu == place->drm_gpu) {
        state.cursor = i;
        return;
      }
    }
  }
  state.cursor = state.shown.empty() ? 0 : std::min(state.cursor, state.shown.size() - 1);
}

}  // namespace

void reorder(TopState& state) {
  const auto place = cursor_place(state);
  state.shown = order_rows(state.rows, state.order);
  restore_cursor(state, place);
}

void apply_snapshot(TopState& state, std::unique_ptr<Snapshot> snapshot, CpuSampler& cpu, const RowContext& context) {
  state.rows = build_rows(*snapshot, cpu, context, &state.drm_engines);
  state.history.record(*snapshot);
  std::set<ProcessKey> alive;
  for (const auto& row : state.rows) alive.insert(row.key);
  std::erase_if(state.tags, [&](const ProcessKey& key) { return !alive.count(key); });
  state.snapshot = std::move(snapshot);
  reorder(state);
}

void apply_event(TopState& state, ActionEvent event) {
  switch (event.kind) {
    case ActionEvent::Kind::PlanReady:
      state.preview = std::move(event.preview);
      state.mode = Mode::Confirm;
      state.set_status("", StatusTone::Info);
      return;
    case ActionEvent::Kind::KillFinished:
      state.kill_running = false;
      state.set_status(std::move(event.status), event.succeeded ? StatusTone::Good : StatusTone::Bad);
      // A signal that reached gpureap during the ladder was meant for it: leave once reported.
      if (event.interrupted_by != 0) state.quit = true;
      return;
    case ActionEvent::Kind::DoctorReady:
      if (state.mode != Mode::Doctor) return;  // left before it answered
      state.doctor = std::move(event);
      state.doctor_scroll = 0;
      return;
    case ActionEvent::Kind::Failed:
      state.kill_running = false;
      if (state.mode == Mode::Planning || state.mode == Mode::Confirm) state.mode = Mode::Browse;
      state.preview.reset();
      state.set_status(std::move(event.status), StatusTone::Bad);
      return;
  }
}

void keep_cursor_visible(TopState& state, std::size_t capacity) {
  if (capacity == 0) return;
  if (state.cursor < state.scroll) state.scroll = state.cursor;
  if (state.cursor >= state.scroll + capacity) state.scroll = state.cursor + 1 - capacity;
  // No empty space below the last row while rows above are hidden.
  if (state.shown.size() >= capacity && state.scroll > state.shown.size() - capacity) {
    state.scroll = state.shown.size() - capacity;
  }
  if (state.shown.size() < capacity) state.scroll = 0;
}

}  // namespace gpureap
