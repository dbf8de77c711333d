// Everything the view shows and remembers between frames: the newest snapshot and its rows,
// how they are ordered, the cursor, tags, the mode the keys are in, a plan awaiting
// confirmation, the doctor's findings and the status line. Changed only by the loop's thread:
// by a snapshot (apply_snapshot), a key (key_machine.hpp) or a worker's event (apply_event).
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "snapshot/snapshot.hpp"
#include "top/action_worker.hpp"
#include "top/cpu_sampler.hpp"
#include "top/gpu_history.hpp"
#include "top/kill_preview.hpp"
#include "top/row_order.hpp"
#include "top/top_row.hpp"

namespace gpureap {

enum class Mode {
  Browse,
  Filter,    // typing the `/` filter
  Planning,  // a kill plan is being made
  Confirm,   // the plan is shown: choose how to end, or cancel
  Help,
  Doctor,    // the doctor's findings for a GPU (or waiting for them)
};

enum class StatusTone { Info, Busy, Good, Bad };

struct TopState {
  std::unique_ptr<Snapshot> snapshot;  // newest; null before the first arrives
  std::vector<TopRow> rows;
  DrmEngineSampler drm_engines;  // DRM clients' engine use between snapshots
  GpuHistory history;
  RowOrder order;
  std::vector<DisplayRow> shown;  // rows in the order shown
  std::size_t cursor = 0;         // into shown
  std::size_t scroll = 0;         // first of shown on screen
  std::set<ProcessKey> tags;
  Mode mode = Mode::Browse;
  std::string filter_before;      // restored when the typing is cancelled
  std::optional<KillPreview> preview;
  bool kill_running = false;
  std::optional<ActionEvent> doctor;  // DoctorReady; none while waiting
  std::optional<unsigned> doctor_gpu;
  std::size_t doctor_scroll = 0;
  std::string status;
  StatusTone status_tone = StatusTone::Info;
  bool readonly = false;     // --readonly: every action refused
  bool can_kill_any = true;  // root or CAP_KILL: no row is another user's to refuse
  double ladder_timeout_s = 10;  // SIGTERM to SIGKILL, as kill's default
  bool quit = false;

  const DisplayRow* current() const { return cursor < shown.size() ? &shown[cursor] : nullptr; }
  void set_status(std::string text, StatusTone tone) {
    status = std::move(text);
    status_tone = tone;
  }
};

// The newest snapshot in: rows rebuilt (CPU from `cpu`'s previous samples), history recorded,
// tags of processes that are gone dropped, the cursor kept on the same process.
void apply_snapshot(TopState& state, std::unique_ptr<Snapshot> snapshot, CpuSampler& cpu, const RowContext& context);

// Re-applies the order (after the filter, sort, tree or GPU changed), keeping the cursor on the
// same row when it is still shown.
void reorder(TopState& state);

// A worker's result: the plan to confirm, the outcome of a kill, the doctor's findings.
void apply_event(TopState& state, ActionEvent event);

// Keeps the cursor within the `capacity` rows shown from `scroll`.
void keep_cursor_visible(TopState& state, std::size_t capacity);

}  // namespace gpureap
