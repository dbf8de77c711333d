#include "drm/client_ledger.hpp"

#include <algorithm>

namespace gpureap::drm {

std::optional<std::uint64_t> client_identity(const DrmFdinfo& record) {
  if (record.format == FdinfoFormat::AmdgpuBefore519) {
    if (record.pasid && *record.pasid != 0) return *record.pasid;
    return std::nullopt;
  }
  return record.client_id;
}

std::vector<pid_t> DrmClient::pids() const {
  std::vector<pid_t> out;
  for (const auto& holder : holders) {
    if (std::find(out.begin(), out.end(), holder.pid) == out.end()) out.push_back(holder.pid);
  }
  return out;
}

void ClientLedger::add(pid_t pid, int fd, DrmFdinfo record) {
  const ClientHolder holder{pid, fd};
  if (const auto identity = client_identity(record)) {
    for (auto& client : clients_) {
      if (client.pdev != record.pdev || client.stats.format != record.format ||
          client_identity(client.stats) != identity) {
        continue;
      }
      if (std::find(client.holders.begin(), client.holders.end(), holder) == client.holders.end()) {
        client.holders.push_back(holder);
      }
      return;
    }
  } else {
    ++unidentified_;
  }
  DrmClient client;
  client.pdev = record.pdev;
  client.client_id = record.client_id.value_or(0);
  client.stats = std::move(record);
  client.holders.push_back(holder);
  clients_.push_back(std::move(client));
}

std::vector<const DrmClient*> ClientLedger::clients_of(const std::string& pdev) const {
  std::vector<const DrmClient*> out;
  for (const auto& client : clients_) {
    if (client.pdev == pdev) out.push_back(&client);
  }
  return out;
}

std::optional<std::uint64_t> ClientLedger::device_memory_of(const std::string& pdev) const {
  std::optional<std::uint64_t> sum;
  for (const auto* client : clients_of(pdev)) {
    const auto bytes = device_memory_bytes(client->stats);
    if (!bytes) continue;
    const std::uint64_t so_far = sum.value_or(0);
    sum = so_far + *bytes < so_far ? UINT64_MAX : so_far + *bytes;
  }
  return sum;
}

std::vector<const DrmClient*> ClientLedger::clients_held_by(pid_t pid) const {
  std::vector<const DrmClient*> out;
  for (const auto& client : clients_) {
    if (std::any_of(client.holders.begin(), client.holders.end(), [pid](const auto& h) { return h.pid == pid; })) {
      out.push_back(&client);
    }
  }
  return out;
}

}  // namespace gpureap::drm
