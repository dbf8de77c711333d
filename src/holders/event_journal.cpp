#include "holders/event_journal.hpp"

#include <chrono>

#include <fmt/format.h>

namespace gpureap::holders {
namespace {

// Enough of a process's story: its fork, open, exec, exit and proof.
constexpr std::size_t kEntriesPerProcess = 6;

}  // namespace

EventJournal::EventJournal(std::size_t capacity)
    : capacity_(capacity > 0 ? capacity : 1), began_(std::chrono::steady_clock::now()) {}

double EventJournal::seconds_since_start() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
}

void EventJournal::next_batch(JournalRead what) {
  const double now = seconds_since_start();
  if (what == JournalRead::ProcessEvents) {
    ++refresh_;
    process_read_at_ = now;
  } else {
    opens_read_at_ = now;
  }
}

void EventJournal::add(const JournalEntry& entry) {
  Stamped stamped{entry, refresh_, 0};
  switch (entry.kind) {
    case JournalKind::Open: stamped.at_seconds = opens_read_at_; break;
    case JournalKind::Fork:
    case JournalKind::Exec:
    case JournalKind::Exit: stamped.at_seconds = process_read_at_; break;
    case JournalKind::LetGo: stamped.at_seconds = seconds_since_start(); break;
  }
  if (ring_.size() < capacity_) {
    ring_.push_back(stamped);
  } else {
    ring_[next_] = stamped;
  }
  next_ = (next_ + 1) % capacity_;
}

// Oldest first; visit(index in that order, entry) returns false to stop.
template <typename Visit>
void EventJournal::for_each(Visit&& visit) const {
  const std::size_t start = ring_.size() < capacity_ ? 0 : next_;
  for (std::size_t i = 0; i < ring_.size(); ++i) {
    if (!visit(i, ring_[(start + i) % ring_.size()])) return;
  }
}

std::string EventJournal::describe(const Stamped& stamped) const {
  const JournalEntry& e = stamped.entry;
  const std::string when = fmt::format("read in refresh {} at {:.3f} s", stamped.refresh, stamped.at_seconds);
  switch (e.kind) {
    case JournalKind::Open: return fmt::format("open {}, {}", when, e.flag ? "with a pidfd" : "without a pidfd (gone)");
    case JournalKind::Fork:
      return fmt::format("forked by {} {}, {}", e.parent, when, e.flag ? "followed" : "not followed");
    case JournalKind::Exec: return fmt::format("exec {}{}", when, e.flag ? "" : " (untracked)");
    case JournalKind::Exit: return fmt::format("exit {}{}", when, e.flag ? "" : " (untracked)");
    case JournalKind::LetGo:
      return fmt::format("let go at {:.3f} s (refresh {}): {}", stamped.at_seconds, stamped.refresh,
                         e.flag ? "it had exited" : "no GPU file left");
  }
  return {};
}

// The last kEntriesPerProcess entries about pid among the first `until` entries.
void EventJournal::describe_process(pid_t pid, std::size_t until, std::string& out) const {
  std::vector<const Stamped*> found;
  for_each([&](std::size_t index, const Stamped& stamped) {
    if (index >= until) return false;
    if (stamped.entry.pid == pid) found.push_back(&stamped);
    return true;
  });
  if (found.empty()) {
    out += "no event of it recorded";
    return;
  }
  const std::size_t first = found.size() > kEntriesPerProcess ? found.size() - kEntriesPerProcess : 0;
  for (std::size_t i = first; i < found.size(); ++i) {
    if (i > first) out += "; ";
    out += describe(*found[i]);
  }
}

std::string EventJournal::explain(pid_t pid) const {
  std::string out = fmt::format("{}: ", pid);
  describe_process(pid, ring_.size(), out);
  // Its parent's story up to the last fork that made it.
  pid_t parent = 0;
  std::size_t fork_index = 0;
  for_each([&](std::size_t index, const Stamped& stamped) {
    if (stamped.entry.kind == JournalKind::Fork && stamped.entry.pid == pid) {
      parent = stamped.entry.parent;
      fork_index = index;
    }
    return true;
  });
  if (parent > 0) {
    out += fmt::format(" | parent {}: ", parent);
    describe_process(parent, fork_index + 1, out);
  }
  out += fmt::format(" (now refresh {})", refresh_);
  return out;
}

}  // namespace gpureap::holders
