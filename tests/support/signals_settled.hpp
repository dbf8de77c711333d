// Waiting until the signals already sent to a process have taken effect, before asserting what
// they did not do (the process still runs, is not stopped). A signal stays pending until its
// target is next scheduled, which a loaded machine can put off past any fixed sleep: a test that
// sleeps and then finds the process alive may only have looked too early.
// Plain C++ and POSIX, header only: the unit and the integration tests use it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

namespace gpureap::test {

// True once `pid` is gone, a zombie or stopped, or asleep with no signal pending that it does
// not block (SigPnd and ShdPnd of /proc/<pid>/status, less SigBlk): every signal sent to it
// before the call has then been acted on. False when that does not happen within timeout_ms
// (a process that keeps running, or blocks a signal sent to it).
inline bool signals_settled(pid_t pid, int timeout_ms = 5000) {
  const auto settled = [pid] {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    if (!status) return true;
    char state = 0;
    std::uint64_t pending = 0, blocked = 0;
    for (std::string line; std::getline(status, line);) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = line.substr(0, colon);
      const std::string value = line.substr(colon + 1);
      const auto mask = [&value] { return std::stoull(value, nullptr, 16); };
      if (key == "State") {
        const auto letter = value.find_first_not_of(" \t");
        if (letter != std::string::npos) state = value[letter];
      } else if (key == "SigPnd" || key == "ShdPnd") {
        pending |= mask();
      } else if (key == "SigBlk") {
        blocked = mask();
      }
    }
    if (state == 0 || state == 'Z' || state == 'X' || state == 'T' || state == 't') return true;
    return state != 'R' && (pending & ~blocked) == 0;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!settled()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace gpureap::test
