// Turns at something costly (bcrypt) shared fairly between peers: at most `running` hold a
// turn at once, at most `max_waiting` wait for one (`max_waiting_per_peer` from one peer), and
// a turn that frees goes to the next peer in rotation, so that a peer flooding requests waits
// behind itself rather than in front of everyone. A request beyond the bounds is refused at
// once: it costs the caller a lock and no wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace gpureap {

struct FairTurnLimits {
  unsigned running = 1;
  unsigned max_waiting = 8;
  unsigned max_waiting_per_peer = 2;
  // Most threads that hold or wait for a turn at once (a worker each).
  unsigned most_held() const { return running + max_waiting; }
};

// Who a peer is for fairness: an IPv4 address as it is, an IPv6 one by its /64 (a host is
// given a whole /64), a v4-mapped IPv6 address as the IPv4 one; anything else as its text.
std::string peer_group(std::string_view remote_addr);

class FairTurns {
 public:
  using Clock = std::chrono::steady_clock;

  explicit FairTurns(FairTurnLimits limits);

  // Held while the costly thing runs; gives the turn to the next peer when destroyed.
  class Turn {
   public:
    Turn() = default;  // none
    Turn(Turn&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Turn& operator=(Turn&& other) noexcept;
    ~Turn();
    explicit operator bool() const { return owner_ != nullptr; }

   private:
    friend class FairTurns;
    explicit Turn(FairTurns* owner) : owner_(owner) {}
    FairTurns* owner_ = nullptr;
  };

  // A turn for `peer` (peer_group's key), waiting until `deadline` at most; an empty Turn when
  // the queue or the peer's share of it is full, or the deadline passed.
  Turn take(const std::string& peer, Clock::time_point deadline);

  unsigned refused() const;  // takes answered with an empty Turn
  unsigned waiting() const;  // takes waiting for a turn now (for tests)

 private:
  void release();
  void grant_locked();

  const FairTurnLimits limits_;
  mutable std::mutex mutex_;
  std::condition_variable granted_cv_;
  unsigned running_ = 0;
  unsigned waiting_ = 0;
  unsigned refused_ = 0;
  std::uint64_t next_ticket_ = 0;
  std::map<std::string, std::deque<std::uint64_t>, std::less<>> waiting_by_peer_;
  std::deque<std::string> rotation_;  // peers with a waiting ticket, the next to be served first
  std::set<std::uint64_t> granted_;   // tickets given a turn, not yet collected by their waiter
};

}  // namespace gpureap
