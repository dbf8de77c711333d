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
                                      IN_DELETE_SELF | IN_MOVE_SELF;
// After these the queue no longer tells every change: the watch is set again and listed.
constexpr std::uint32_t kWatchLost = IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT;
// A file's name appearing, going or moving, and its content or times changing.
constexpr std::uint32_t kFileEvents = kNameEvents | IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB;

enum class Drained { Nothing, Changed, Lost };

// Reads every queued event of `inotify`; Changed when one names `name` (or any, when empty),
// Lost when the kernel ended the watch or the queue overflowed (the caller sets it again).
Drained drain(int inotify, std::string_view name) {
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
      const char* event_name = buf + at + sizeof event;
      if (name.empty() || std::string_view(event_name, ::strnlen(event_name, event.len)) == name) changed = true;
      at += static_cast<ssize_t>(sizeof event + event.len);
    }
  }
  return changed ? Drained::Changed : Drained::Nothing;
}

}  // namespace

void DirectoryWatch::close() {
  inotify_ = OwnedFd();
  stale_ = true;
}

bool DirectoryWatch::may_have_changed(const std::string& dir, std::uint32_t events, std::string_view name) {
  if (dir != dir_) {
    close();
    unwatchable_ = false;
    dir_ = dir;
  }
  if (inotify_.get() >= 0) {
    const Drained drained = drain(inotify_.get(), name);
    if (drained == Drained::Lost) inotify_ = OwnedFd();
    if (drained == Drained::Nothing && !stale_) return false;
  }
  if (inotify_.get() < 0 && !unwatchable_ && time_to_watch()) {
    inotify_ = OwnedFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (inotify_.get() < 0 || ::inotify_add_watch(inotify_.get(), dir.c_str(), events | IN_ONLYDIR) < 0) {
      inotify_ = OwnedFd();
      unwatchable_ = true;
    }
  }
  stale_ = inotify_.get() < 0;
  return true;
}

bool DirectoryWatch::time_to_watch() {
  if (watch_after_.count() == 0) return true;
  const auto now = std::chrono::steady_clock::now();
  if (!first_call_) first_call_ = now;
  return now - *first_call_ >= watch_after_;
}

Result<std::optional<std::vector<DirEntry>>> WatchedListing::list_if_changed(const std::string& path) {
  if (!watch_.may_have_changed(path, kNameEvents, {})) return std::optional<std::vector<DirEntry>>{};
  auto entries = list_dir_entries(path);
  if (!entries.ok()) {
    watch_.invalidate();
    return Error{entries.error().message};
  }
  return std::optional<std::vector<DirEntry>>{std::move(*entries)};
}

bool WatchedFile::may_have_changed(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return watch_.may_have_changed(".", kFileEvents, path);
  return watch_.may_have_changed(slash == 0 ? "/" : path.substr(0, slash), kFileEvents,
                                 std::string_view(path).substr(slash + 1));
}

}  // namespace gpusim
