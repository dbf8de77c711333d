// What the spawn tests look at in /proc after a helper ran.
#pragma once

#include <sys/types.h>

#include <fstream>
#include <string>

namespace gpureap::spawn_test {

// Alive and not a zombie.
inline bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const auto close = text.rfind(')');
  return close != std::string::npos && text.size() > close + 2 && text[close + 2] != 'Z';
}

// The PID a helper wrote into `path`, or 0.
inline pid_t read_pid(const std::string& path) {
  pid_t pid = 0;
  std::ifstream(path) >> pid;
  return pid;
}

}  // namespace gpureap::spawn_test
