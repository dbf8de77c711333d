#include "common/watched_listing.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpusim {

namespace {

// Names appearing, going or moving; and the directory itself going, which ends the watch.
constexpr std::uint32_t kNameEvents = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                      IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
// After these the queue no longer tells every change: the watch is set again and listed.
constexpr std::uint32_t kWatchLost = IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT;

}  // namespace

void WatchedListing::close() {
  inotify_ = OwnedFd();
  stale_ = true;
}

void WatchedListing::watch(const std::string& path) {
  inotify_ = OwnedFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (inotify_.get() < 0 || ::inotify_add_watch(inotify_.get(), path.c_str(), kNameEvents) < 0) {
    inotify_ = OwnedFd();
    unwatchable_ = true;
  }
}

// Reads every queued event; true when there was one. A watch the kernel ended or whose
// queue overflowed is closed, to be set again before the next listing.
bool WatchedListing::drain_changes() {
  alignas(inotify_event) char buf[4096];
  bool any = false;
  bool lost = false;
  for (;;) {
    const ssize_t n = ::read(inotify_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      lost = true;
      break;
    }
    any = true;
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      inotify_event event;
      std::memcpy(&event, buf + at, sizeof event);
      if (event.mask & kWatchLost) lost = true;
      at += static_cast<ssize_t>(sizeof event + event.len);
    }
  }
  if (lost) inotify_ = OwnedFd();
  return any || lost;
}

Result<std::optional<std::vector<DirEntry>>> WatchedListing::list_if_changed(const std::string& path) {
  if (path != path_) {
    close();
    unwatchable_ = false;
    path_ = path;
  }
  if (inotify_.get() >= 0 && !drain_changes() && !stale_) return std::optional<std::vector<DirEntry>>{};
  // The watch is set before the listing, so that a change made during it is queued for the
  // next call.
  if (inotify_.get() < 0 && !unwatchable_) watch(path);
  auto entries = list_dir_entries(path);
  if (!entries.ok()) {
    stale_ = true;
    return Error{entries.error().message};
  }
  stale_ = false;
  return std::optional<std::vector<DirEntry>>{std::move(*entries)};
}

}  // namespace gpusim
