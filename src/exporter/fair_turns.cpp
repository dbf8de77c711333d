#include "exporter/fair_turns.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdio>

namespace gpureap {
namespace {

constexpr std::size_t kMaxPeerText = 64;

}  // namespace

std::string peer_group(std::string_view remote_addr) {
  const std::string text(remote_addr.substr(0, kMaxPeerText));
  std::array<unsigned char, 16> bytes{};
  if (inet_pton(AF_INET, text.c_str(), bytes.data()) == 1) return text;
  if (inet_pton(AF_INET6, text.c_str(), bytes.data()) != 1) return text;
  constexpr std::array<unsigned char, 12> kV4Mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(kV4Mapped.begin(), kV4Mapped.end(), bytes.begin())) {
    char v4[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, bytes.data() + 12, v4, sizeof v4);
    return v4;
  }
  char prefix[32] = {};
  std::snprintf(prefix, sizeof prefix, "%02x%02x:%02x%02x:%02x%02x:%02x%02x::/64", bytes[0], bytes[1], bytes[2], bytes[3],
                bytes[4], bytes[5], bytes[6], bytes[7]);
  return prefix;
}

FairTurns::FairTurns(FairTurnLimits limits) : limits_(limits) {}

FairTurns::Turn::~Turn() {
  if (owner_ != nullptr) owner_->release();
}

FairTurns::Turn& FairTurns::Turn::operator=(Turn&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) owner_->release();
    owner_ = other.owner_;
    other.owner_ = nullptr;
  }
  return *this;
}

FairTurns::Turn FairTurns::take(const std::string& peer, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (running_ < limits_.running && waiting_ == 0) {
    ++running_;
    return Turn(this);
  }
  auto& mine = waiting_by_peer_[peer];
  if (waiting_ >= limits_.max_waiting || mine.size() >= limits_.max_waiting_per_peer) {
    if (mine.empty()) waiting_by_peer_.erase(peer);
    ++refused_;
    return Turn();
  }
  const std::uint64_t ticket = next_ticket_++;
  if (mine.empty()) rotation_.push_back(peer);
  mine.push_back(ticket);
  ++waiting_;
  grant_locked();
  granted_cv_.wait_until(lock, deadline, [&] { return granted_.count(ticket) != 0; });
  if (granted_.erase(ticket) != 0) return Turn(this);  // running_ was counted when granted
  // The deadline passed first: the ticket leaves the queue untaken.
  auto it = waiting_by_peer_.find(peer);
  if (it != waiting_by_peer_.end()) {
    std::erase(it->second, ticket);
    if (it->second.empty()) {
      waiting_by_peer_.erase(it);
      std::erase(rotation_, peer);
    }
  }
  --waiting_;
  ++refused_;
  return Turn();
}

void FairTurns::release() {
  const std::lock_guard lock(mutex_);
  --running_;
  grant_locked();
}

void FairTurns::grant_locked() {
  bool any = false;
  while (running_ < limits_.running && !rotation_.empty()) {
    const std::string peer = std::move(rotation_.front());
    rotation_.pop_front();
    auto it = waiting_by_peer_.find(peer);
    granted_.insert(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) {
      waiting_by_peer_.erase(it);
    } else {
      rotation_.push_back(peer);  // its next ticket after every other peer's
    }
    --waiting_;
    ++running_;
    any = true;
  }
  if (any) granted_cv_.notify_all();
}

unsigned FairTurns::refused() const {
  const std::lock_guard lock(mutex_);
  return refused_;
}

unsigned FairTurns::waiting() const {
  const std::lock_guard lock(mutex_);
  return waiting_;
}

}  // namespace gpureap
