// A directory listed again only when inotify says a name in it changed.
//
// The driver library answers every NVML call from allocs/, and a client makes dozens of calls
// a second: listing a directory of some hundred names at each would be a large part of what
// the library costs a client. inotify queues its event within the very system call that creates,
// renames or removes a name, before that call returns, so while the queue stays empty the
// last listing is the directory as it is now: a context published before a call is in that
// call's answer, as on a real driver. Where no watch can be had (no inotify instance left to
// this user, no such directory) every call lists, as before.
//
// WatchedFile does the same for one file that a call reads state from (config.json): its name's
// events in its directory (a rename into place, a write, a touch) are what makes the caller look
// at it again, instead of a stat of its path at every call.
//
// A forked child shares its parent's inotify descriptions, and an event one of them reads the
// other never sees: the driver closes the child's copies (close(), from pthread_atfork's child
// handler), so that the child sets watches of its own.
//
// A watch costs its process a wait when the instance is closed, at exit too: the kernel frees
// an inotify instance's marks only after an SRCU grace period, and the close waits for it
// (0.1 to 15 ms measured here, in whole scheduler ticks). A real driver library costs its
// client no such wait, and a short-lived client (`gpureap ps`, nvidia-smi) makes a few dozen
// calls in its first milliseconds, too few for the watch to pay for itself. So the driver's
// watches are set only once the process has been calling for kClientWatchAfter; until then
// every call lists, as where no watch can be had.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_io.hpp"
#include "common/result.hpp"

namespace gpusim {

// How long a driver library's client calls before its watches are set (see above).
inline constexpr std::chrono::milliseconds kClientWatchAfter{50};

// What both share: whether a name in a directory (or any name: an empty `name`) may have
// changed since the last call said no. True at the first call, after invalidate(), and at every
// call where no watch can be had; the watch is set before the caller looks, so that a change
// made while it looks is queued for the next call.
class DirectoryWatch {
 public:
  // watch_after: no watch is set before this much time has passed since the first call.
  explicit DirectoryWatch(std::chrono::milliseconds watch_after = {}) : watch_after_(watch_after) {}
  DirectoryWatch(const DirectoryWatch&) = delete;
  DirectoryWatch& operator=(const DirectoryWatch&) = delete;

  bool may_have_changed(const std::string& dir, std::uint32_t events, std::string_view name);
  void invalidate() { stale_ = true; }
  bool watching() const { return inotify_.get() >= 0; }
  void close();

 private:
  bool time_to_watch();

  std::string dir_;
  OwnedFd inotify_;
  bool unwatchable_ = false;  // a watch failed: every call says changed
  bool stale_ = true;
  std::chrono::milliseconds watch_after_;
  std::optional<std::chrono::steady_clock::time_point> first_call_;
};

class WatchedListing {
 public:
  explicit WatchedListing(std::chrono::milliseconds watch_after = {}) : watch_(watch_after) {}
  // The entries of `path` when a name in it may have changed since the last listing this
  // returned (or there was none); nullopt when that listing still holds.
  Result<std::optional<std::vector<DirEntry>>> list_if_changed(const std::string& path);
  // The next call lists again (an entry could not be read, and is to be tried again).
  void invalidate() { watch_.invalidate(); }
  // Whether a watch is set now (tests: the fallback is exercised where none can be had).
  bool watching() const { return watch_.watching(); }
  void close() { watch_.close(); }

 private:
  DirectoryWatch watch_;
};

class WatchedFile {
 public:
  explicit WatchedFile(std::chrono::milliseconds watch_after = {}) : watch_(watch_after) {}
  // Whether the file at `path` may have changed since the last call (true at the first call,
  // after invalidate(), and at every call where no watch can be had).
  bool may_have_changed(const std::string& path);
  // The next call says it may have changed (the caller could not read it, and tries again).
  void invalidate() { watch_.invalidate(); }
  bool watching() const { return watch_.watching(); }
  void close() { watch_.close(); }

 private:
  DirectoryWatch watch_;
};

}  // namespace gpusim
