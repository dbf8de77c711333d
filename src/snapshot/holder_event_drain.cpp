#include "snapshot/holder_event_drain.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <vector>

namespace gpureap {
namespace {

// The least time between two reads: a busy host's events are read in batches, not one by one.
constexpr std::chrono::milliseconds kDrainGap{20};
// How often to look whether the first scan has started the events.
constexpr std::chrono::milliseconds kStartCheck{100};

}  // namespace

HolderEventDrain::HolderEventDrain(std::shared_ptr<HolderEvents> events) : events_(std::move(events)) {
  if (!events_) return;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;  // no thread: the scans read the events, as before
  stop_read_ = procfs::unique_fd(fds[0]);
  stop_write_ = procfs::unique_fd(fds[1]);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error&) {
    // No thread to be had (RLIMIT_NPROC): the scans read the events, as before.
  }
}

HolderEventDrain::~HolderEventDrain() {
  if (!thread_.joinable()) return;
  const char byte = 0;
  while (::write(stop_write_.get(), &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
}

bool HolderEventDrain::wait(const std::vector<int>& fds, std::chrono::milliseconds timeout) {
  std::vector<pollfd> polled{{stop_read_.get(), POLLIN, 0}};
  for (const int fd : fds) polled.push_back({fd, POLLIN, 0});
  while (::poll(polled.data(), polled.size(), static_cast<int>(timeout.count())) < 0 && errno == EINTR) {
  }
  return (polled[0].revents & (POLLIN | POLLHUP)) == 0;
}

void HolderEventDrain::run() {
  for (;;) {
    const std::vector<int> fds = events_->event_fds();
    if (fds.empty()) {
      if (events_->started()) return;  // no events here: the scans walk
      if (!wait({}, kStartCheck)) return;
      continue;
    }
    if (!wait(fds, std::chrono::milliseconds(-1))) return;
    events_->read_events();
    if (!wait({}, kDrainGap)) return;
  }
}

}  // namespace gpureap
