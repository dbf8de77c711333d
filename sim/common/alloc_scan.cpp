#include "common/alloc_scan.hpp"

#include <unistd.h>

#include <algorithm>

#include "common/file_io.hpp"
#include "common/lock_protocol.hpp"

namespace gpusim {

const char* alloc_state_name(AllocState s) {
  switch (s) {
    case AllocState::Active: return "active";
    case AllocState::Orphaned: return "orphaned";
    case AllocState::Leaked: return "leaked";
    case AllocState::Releasing: return "releasing";
    case AllocState::Released: return "released";
  }
  return "?";
}

void delete_allocation_files(const Layout& layout, const std::string& id) {
  ::unlink(layout.alloc_json(id).c_str());
  ::unlink(layout.alloc_hold(id).c_str());
  ::unlink(layout.alloc_owner(id).c_str());
  ::unlink(layout.alloc_released(id).c_str());
}

static std::uint64_t release_delay_ms(const AllocRecord& rec, const Config& config) {
  if (rec.release_delay_ms) return *rec.release_delay_ms;
  if (rec.gpu < config.gpus.size()) return config.gpus[rec.gpu].release_delay_ms;
  return 0;
}

// Decides the state of one context. nullopt: it disappeared while we looked.
static std::optional<AllocView> observe(const Layout& layout, const Config& config,
                                        AllocRecord rec, std::int64_t now_ns) {
  AllocView v;
  v.rec = std::move(rec);
  const std::string& id = v.rec.id;
  Probe owner = probe_owner_alive(layout.alloc_owner(id));
  if (owner == Probe::Gone) return std::nullopt;
  if (owner == Probe::Yes) {
    v.owner_alive = v.held = true;
    v.state = AllocState::Active;
    return v;
  }
  Probe held = probe_held(layout.alloc_hold(id));
  if (held == Probe::Gone) return std::nullopt;
  if (held == Probe::Yes) {
    v.held = true;
    v.state = AllocState::Orphaned;
    return v;
  }
  // No holder is left; nobody can take the lock again (only inheritance shares it).
  if (v.rec.leak) {
    v.state = AllocState::Leaked;
    return v;
  }
  std::uint64_t delay_ms = release_delay_ms(v.rec, config);
  std::int64_t stamp = now_ns;
  if (auto s = stamp_released(layout.alloc_released(id), now_ns); s.ok()) stamp = *s;
  v.released_at_ns = stamp;
  v.release_due_ns = stamp + static_cast<std::int64_t>(delay_ms) * 1000000LL;
  if (delay_ms > 0 && now_ns < *v.release_due_ns) {
    v.state = AllocState::Releasing;
    return v;
  }
  v.state = AllocState::Released;
  delete_allocation_files(layout, id);
  return v;
}

// The record in allocs/<entry>, from `cache` when the same file was parsed before.
static std::optional<AllocRecord> load_record(const Layout& layout, const DirEntry& entry,
                                              const RecordCache* cache) {
  if (cache != nullptr) {
    if (auto it = cache->find(entry.name); it != cache->end() && it->second.ino == entry.ino) {
      return it->second.rec;
    }
  }
  ReadResult r = read_file(layout.allocs_dir() + "/" + entry.name);
  if (!r.ok()) return std::nullopt;
  auto rec = parse_alloc_record(r.data);
  if (!rec.ok()) return std::nullopt;
  return std::move(*rec);
}

Result<std::vector<AllocView>> scan_allocations(const Layout& layout, const Config& config,
                                                std::int64_t now_ns, RecordCache* cache,
                                                std::optional<unsigned> only_gpu) {
  auto entries = list_dir_entries(layout.allocs_dir());
  if (!entries.ok()) return Error{entries.error().message};
  std::vector<AllocView> views;
  RecordCache listed;
  for (const DirEntry& entry : *entries) {
    const std::string& name = entry.name;
    if (name.empty() || name[0] == '.') continue;  // temp files and the allocation lock
    if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".json") != 0) continue;
    auto rec = load_record(layout, entry, cache);
    if (!rec) continue;
    if (cache != nullptr) listed[name] = CachedRecord{entry.ino, *rec};
    if (only_gpu && rec->gpu != *only_gpu) continue;
    if (auto v = observe(layout, config, std::move(*rec), now_ns)) views.push_back(std::move(*v));
  }
  if (cache != nullptr) *cache = std::move(listed);
  std::sort(views.begin(), views.end(), [](const AllocView& a, const AllocView& b) {
    if (a.rec.created_ns != b.rec.created_ns) return a.rec.created_ns < b.rec.created_ns;
    return a.rec.id < b.rec.id;
  });
  return views;
}

std::uint64_t allocated_bytes(const std::vector<AllocView>& views, unsigned gpu) {
  std::uint64_t sum = 0;
  for (const auto& v : views) {
    if (v.rec.gpu == gpu && v.counts_memory()) sum += v.rec.bytes;
  }
  return sum;
}

std::uint64_t allocated_bytes_on_instance(const std::vector<AllocView>& views, unsigned gpu,
                                          unsigned gi) {
  std::uint64_t sum = 0;
  for (const auto& v : views) {
    if (v.rec.gpu == gpu && v.rec.gi == gi && v.counts_memory()) sum += v.rec.bytes;
  }
  return sum;
}

}  // namespace gpusim
