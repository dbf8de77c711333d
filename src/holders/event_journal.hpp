// A bounded record of the last events the holder tracker read (holder_tracker.hpp), to explain
// a holder a walk found that the events had missed: how it came by its descriptor (an open, a
// fork of which parent, an exec) and when each event was read. A missed holder is a fault to
// find, so the record says what the tracker knew when it decided.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <sys/types.h>

namespace gpureap::holders {

enum class JournalKind { Open, Fork, Exec, Exit, LetGo };
// Which of a refresh's two reads an event came in: the process events are read first.
enum class JournalRead { ProcessEvents, Opens };

struct JournalEntry {
  JournalKind kind = JournalKind::Open;
  pid_t pid = 0;     // the process (a fork's child)
  pid_t parent = 0;  // a fork's parent
  // Open: a pidfd came with it. Fork: the child was followed. Exec, Exit: it was tracked then.
  // LetGo: its proof failed because it had exited (else it held no GPU file any more).
  bool flag = false;
};

class EventJournal {
 public:
  explicit EventJournal(std::size_t capacity = 16384);
  // The next read of `what` has begun; entries added from now on of its kind came in it.
  void next_batch(JournalRead what);
  void add(const JournalEntry& entry);
  // One line: what the record holds of pid and of the parent that forked it.
  std::string explain(pid_t pid) const;

 private:
  struct Stamped {
    JournalEntry entry;
    std::uint64_t refresh = 0;  // which refresh read it
    double at_seconds = 0;      // when it was read (or, for LetGo, decided), since the journal began
  };
  double seconds_since_start() const;
  std::string describe(const Stamped& stamped) const;
  void describe_process(pid_t pid, std::size_t until, std::string& out) const;
  template <typename Visit>
  void for_each(Visit&& visit) const;

  std::vector<Stamped> ring_;
  std::size_t capacity_;
  std::size_t next_ = 0;
  std::chrono::steady_clock::time_point began_;
  std::uint64_t refresh_ = 0;
  double process_read_at_ = 0;
  double opens_read_at_ = 0;
};

}  // namespace gpureap::holders
