// A directory listed again only when inotify says a name in it changed.
//
// The driver library answers every NVML call from allocs/, and a client makes dozens of calls
// a second: listing a directory of some hundred names at each would be a large part of what
// the library costs a client. inotify queues its event within the very system call that creates,
// renames or removes a name, before that call returns, so while the queue stays empty the
// last listing is the directory as it is now: a context published before a call is in that
// call's answer, as on a real driver. Where no watch can be had (no inotify instance left to
// this user, no such directory) every call lists, as before.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/file_io.hpp"
#include "common/result.hpp"

namespace gpusim {

class WatchedListing {
 public:
  WatchedListing() = default;
  WatchedListing(const WatchedListing&) = delete;
  WatchedListing& operator=(const WatchedListing&) = delete;

  // The entries of `path` when a name in it may have changed since the last listing this
  // returned (or there was none); nullopt when that listing still holds.
  Result<std::optional<std::vector<DirEntry>>> list_if_changed(const std::string& path);
  // The next call lists again (an entry could not be read, and is to be tried again).
  void invalidate() { stale_ = true; }
  // Whether a watch is set now (tests: the fallback is exercised where none can be had).
  bool watching() const { return inotify_.get() >= 0; }
  void close();

 private:
  void watch(const std::string& path);
  bool drain_changes();

  std::string path_;
  OwnedFd inotify_;
  bool unwatchable_ = false;  // a watch failed: every call lists
  bool stale_ = true;
};

}  // namespace gpusim
