// Turns at bcrypt shared between peers: a bounded queue, a share per peer, served in rotation.
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "exporter/fair_turns.hpp"

namespace gpureap {
namespace {

using namespace std::chrono_literals;

FairTurns::Clock::time_point far() { return FairTurns::Clock::now() + 60s; }

// Waits (without a fixed sleep) until `turns` has refused `n` takes or `waiting` reports `w`.
template <typename Ready>
void wait_until(Ready ready) {
  const auto give_up = FairTurns::Clock::now() + 30s;
  while (!ready() && FairTurns::Clock::now() < give_up) std::this_thread::yield();
  ASSERT_TRUE(ready());
}

TEST(ExporterFairTurns, APeerThatFloodsWaitsBehindTheOthersAndBeyondItsShareIsRefusedAtOnce) {
  FairTurns turns({.running = 1, .max_waiting = 8, .max_waiting_per_peer = 2});
  std::mutex order_mutex;
  std::vector<std::string> order;
  std::vector<std::jthread> waiters;
  {
    auto held = turns.take("flood", far());
    ASSERT_TRUE(held);
    auto wait_for_turn = [&](std::string peer, std::string name) {
      waiters.emplace_back([&, peer, name] {
        auto turn = turns.take(peer, far());
        const std::lock_guard lock(order_mutex);
        order.push_back(turn ? name : name + " refused");
      });
    };
    wait_for_turn("flood", "flood 1");
    wait_until([&] { return turns.waiting() == 1; });
    wait_for_turn("flood", "flood 2");
    wait_until([&] { return turns.waiting() == 2; });
    // The flood's share is full: its third request is refused without waiting for a turn.
    EXPECT_FALSE(turns.take("flood", far()));
    EXPECT_EQ(turns.refused(), 1u);
    wait_for_turn("scraper", "scraper");
    wait_until([&] { return turns.waiting() == 3; });
  }  // the held turn ends: the rest go in rotation
  for (auto& w : waiters) w.join();
  EXPECT_EQ(order, (std::vector<std::string>{"flood 1", "scraper", "flood 2"}));
  EXPECT_EQ(turns.waiting(), 0u);
}

TEST(ExporterFairTurns, AFullQueueRefusesEveryPeerAndAPassedDeadlineLeavesIt) {
  FairTurns turns({.running = 1, .max_waiting = 2, .max_waiting_per_peer = 2});
  auto held = turns.take("a", far());
  ASSERT_TRUE(held);
  std::vector<std::jthread> waiters;
  std::atomic<int> served{0};
  for (const char* peer : {"b", "c"}) {
    waiters.emplace_back([&, peer] { served += turns.take(peer, far()) ? 1 : 0; });
  }
  wait_until([&] { return turns.waiting() == 2; });
  EXPECT_FALSE(turns.take("d", far())) << "a new peer too, once the queue is full";
  // A take whose deadline has passed does not stay in the queue.
  FairTurns other({.running = 1, .max_waiting = 2, .max_waiting_per_peer = 2});
  auto busy = other.take("a", far());
  EXPECT_FALSE(other.take("b", FairTurns::Clock::now()));
  EXPECT_EQ(other.waiting(), 0u);
  EXPECT_EQ(other.refused(), 1u);
  held = FairTurns::Turn();
  for (auto& w : waiters) w.join();
  EXPECT_EQ(served.load(), 2);
}

TEST(ExporterFairTurns, PeersAreTheirAddressesAndAnIpv6HostItsSlash64) {
  EXPECT_EQ(peer_group("192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(peer_group("::ffff:192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(peer_group("2001:db8:1:2:aaaa::1"), peer_group("2001:db8:1:2:bbbb::2"));
  EXPECT_NE(peer_group("2001:db8:1:2::1"), peer_group("2001:db8:1:3::1"));
  EXPECT_EQ(peer_group(""), "");
}

}  // namespace
}  // namespace gpureap
