// DRM clients counted once. A client is one open file description of a DRM device: dup'd
// descriptors, descriptors inherited across fork and descriptors passed over a socket all share
// it, and each shows the same drm-client-id with the same memory. The document names
// (drm-pdev, drm-client-id) as what tells clients apart, so memory is summed over those pairs,
// never over descriptors or processes. amdgpu's format before 5.19 has no drm-client-id; its
// pasid tells its clients apart instead (client_identity).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "drm/fdinfo_record.hpp"

namespace gpureap::drm {

// What tells a record's client from others on the same device: drm-client-id; for amdgpu's
// format before 5.19 the pasid, which amdgpu allocates per open file (the file's VM, in
// amdgpu_driver_open_kms) from one pool for all its devices, 0 meaning none could be had.
// nullopt when the record has neither: such a client cannot be matched with any other.
std::optional<std::uint64_t> client_identity(const DrmFdinfo& record);

struct ClientHolder {
  pid_t pid = 0;
  int fd = -1;
  bool operator==(const ClientHolder&) const = default;
};

struct DrmClient {
  std::string pdev;
  std::uint64_t client_id = 0;  // drm-client-id; 0 when the record has none
  DrmFdinfo stats;                    // from the first descriptor read
  std::vector<ClientHolder> holders;  // every (pid, fd) showing this client, in the order added
  // The distinct PIDs among holders, in the order first seen.
  std::vector<pid_t> pids() const;
};

class ClientLedger {
 public:
  // Records that `pid`'s descriptor `fd` has `record`. A record without client_identity cannot
  // be told apart from others and is kept as a client of its own (counted once per descriptor);
  // `unidentified()` says how many there were.
  void add(pid_t pid, int fd, DrmFdinfo record);

  const std::vector<DrmClient>& clients() const { return clients_; }
  std::size_t unidentified() const { return unidentified_; }

  // The clients of one device (by drm-pdev); each once.
  std::vector<const DrmClient*> clients_of(const std::string& pdev) const;
  // Device memory (VRAM) of the device's clients, each client once; nullopt when none reports any.
  std::optional<std::uint64_t> device_memory_of(const std::string& pdev) const;
  // The clients `pid` holds a descriptor of.
  std::vector<const DrmClient*> clients_held_by(pid_t pid) const;

 private:
  std::vector<DrmClient> clients_;
  std::size_t unidentified_ = 0;
};

}  // namespace gpureap::drm
