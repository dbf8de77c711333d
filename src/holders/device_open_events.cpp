#include "holders/device_open_events.hpp"

#include <fcntl.h>
#include <sys/fanotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace gpureap::holders {

std::optional<DeviceOpenEvents> DeviceOpenEvents::open(std::string* why) {
  DeviceOpenEvents events;
  // FAN_CLASS_NOTIF: nothing waits for us (a permission class would stall every opener).
  events.fd_ = procfs::unique_fd(::fanotify_init(
      FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_FID | FAN_REPORT_PIDFD, O_RDONLY | O_CLOEXEC));
  if (!events.fd_) {
    if (why != nullptr) {
      *why = errno == EPERM    ? "fanotify: not permitted (needs CAP_SYS_ADMIN)"
             : errno == ENOSYS ? "fanotify: this kernel has none"
             : errno == EINVAL ? "fanotify: this kernel cannot report pidfds in file-handle mode (Linux < 5.15)"
                               : fmt::format("fanotify: {}", std::strerror(errno));
    }
    return std::nullopt;
  }
  return events;
}

bool DeviceOpenEvents::mark(const std::string& path, std::string* why) {
  if (::fanotify_mark(fd_.get(), FAN_MARK_ADD | FAN_MARK_DONT_FOLLOW, FAN_OPEN | FAN_CLOSE, AT_FDCWD, path.c_str()) == 0) {
    return true;
  }
  if (why != nullptr) *why = fmt::format("fanotify cannot mark {}: {}", path, std::strerror(errno));
  return false;
}

void DeviceOpenEvents::drain(DeviceOpenBatch& batch) {
  char buffer[8192];
  while (true) {
    const ssize_t n = ::read(fd_.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: nothing more queued
    }
    if (n == 0) return;
    // Records follow each other unpadded (a 60-byte event puts the next one off alignment):
    // each is copied out, never read in place.
    const auto size = static_cast<std::size_t>(n);
    for (std::size_t offset = 0; offset + sizeof(fanotify_event_metadata) <= size;) {
      fanotify_event_metadata event{};
      std::memcpy(&event, buffer + offset, sizeof event);
      if (event.event_len < sizeof event || event.event_len > size - offset || event.metadata_len > event.event_len) break;
      DeviceOpen open;
      // The pidfd record comes after the file handle; every pidfd made is owned here, even
      // of an event we then leave out.
      const char* info = buffer + offset + event.metadata_len;
      const char* end = buffer + offset + event.event_len;
      while (info + sizeof(fanotify_event_info_header) <= end) {
        fanotify_event_info_header header{};
        std::memcpy(&header, info, sizeof header);
        if (header.len < sizeof header || header.len > static_cast<std::size_t>(end - info)) break;
        if (header.info_type == FAN_EVENT_INFO_TYPE_PIDFD && header.len >= sizeof(fanotify_event_info_pidfd)) {
          fanotify_event_info_pidfd record{};
          std::memcpy(&record, info, sizeof record);
          if (record.pidfd >= 0) open.pidfd = procfs::unique_fd(record.pidfd);
        }
        info += header.len;
      }
      if (event.fd >= 0) ::close(event.fd);  // file-handle mode opens none; never leak one
      if ((event.mask & FAN_Q_OVERFLOW) != 0) {
        batch.overflowed = true;
      } else if (event.vers == FANOTIFY_METADATA_VERSION) {
        open.pid = event.pid;
        open.opened = (event.mask & FAN_OPEN) != 0;
        open.closed = (event.mask & FAN_CLOSE) != 0;
        batch.events.push_back(std::move(open));
      }
      offset += event.event_len;
    }
  }
}

}  // namespace gpureap::holders
