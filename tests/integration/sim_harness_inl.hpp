#pragma once

#include <poll.h>

#include <chrono>

namespace gpureap::test {

template <typename Predicate>
bool eventually(Predicate predicate, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (predicate()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    poll(nullptr, 0, 20);
  }
}

}  // namespace gpureap::test
