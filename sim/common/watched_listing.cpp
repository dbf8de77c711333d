#include "common/watched_listing.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace gpusim {

namespace {

// Names appearing, going or moving; and the directory itself going, which ends the watch.
constexpr std::uint32_t kNameEvents = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                      IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
// After these the queue no longer tells every change: the watch is set again and listed.
constexpr std::uint32_t kWatchLost = IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT;
// A file's name appearing, going or moving, and its content or times changing.
constexpr std::uint32_t kFileEvents = kNameEvents | IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB;

enum class Drained { Nothing, Changed, Lost };

// Reads every queued event of `inotify`; Changed when one `matters` (by its name; null: any),
// Lost when the kernel ended the watch or the queue overflowed (the caller sets it again).
template <typename Matters>
Drained drain(int inotify, Matters matters) {
  alignas(inotify_event) char buf[4096];
  bool changed = false;
  for (;;) {
    const ssize_t n = ::read(inotify, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) return Drained::Lost;
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      inotify_event event;
      std::memcpy(&event, buf + at, sizeof event);
      if (event.mask & kWatchLost) return Drained::Lost;
      const char* name = buf + at + sizeof event;
      if (matters(event.len > 0 ? std::string_view(name, ::strnlen(name, event.len)) : std::string_view())) changed = true;
      at += static_cast<ssize_t>(sizeof event + event.len);
    }
  }
  return changed ? Drained::Changed : Drained::Nothing;
}

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
  const Drained drained = drain(inotify_.get(), [](std::string_view) { return true; });
  if (drained == Drained::Lost) inotify_ = OwnedFd();
  return drained != Drained::Nothing;
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

void WatchedFile::close() {
  inotify_ = OwnedFd();
  stale_ = true;
}

bool WatchedFile::may_have_changed(const std::string& path) {
  if (path != path_) {
    close();
    unwatchable_ = false;
    path_ = path;
    const auto slash = path.rfind('/');
    name_ = slash == std::string::npos ? path : path.substr(slash + 1);
  }
  if (inotify_.get() >= 0) {
    const Drained drained = drain(inotify_.get(), [this](std::string_view name) { return name == name_; });
    if (drained == Drained::Lost) inotify_ = OwnedFd();
    if (drained == Drained::Nothing && !stale_) return false;
  }
  // The watch is set before the caller looks, so that a change made while it looks is queued
  // for the next call.
  if (inotify_.get() < 0 && !unwatchable_) {
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    inotify_ = OwnedFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (inotify_.get() < 0 || ::inotify_add_watch(inotify_.get(), dir.c_str(), kFileEvents | IN_ONLYDIR) < 0) {
      inotify_ = OwnedFd();
      unwatchable_ = true;
    }
  }
  stale_ = inotify_.get() < 0;
  return true;
}

}  // namespace gpusim
