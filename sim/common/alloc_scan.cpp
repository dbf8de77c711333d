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

// Owner files a cache keeps open at most: beyond, contexts are probed by path.
constexpr std::size_t kMaxOwnersOpen = 256;

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

// A kept record's state: its owner's lock asked through the file kept open, one fcntl; once
// the answer is no, every answer by path as for a record seen first (the files may be gone).
static std::optional<AllocView> observe_kept(const Layout& layout, const Config& config,
                                             CachedRecord& kept, RecordCache& cache, std::int64_t now_ns) {
  if (kept.owner.get() < 0 && cache.owners_open < kMaxOwnersOpen) {
    kept.owner = OwnedFd(open_owner_file(layout.alloc_owner(kept.rec.id)));
    if (kept.owner.get() >= 0) ++cache.owners_open;
  }
  if (kept.owner.get() >= 0 && probe_owner_alive(kept.owner.get()) == Probe::Yes) {
    AllocView v;
    v.rec = kept.rec;
    v.owner_alive = v.held = true;
    v.state = AllocState::Active;
    return v;
  }
  return observe(layout, config, kept.rec, now_ns);
}

static std::optional<AllocRecord> read_record(const Layout& layout, const DirEntry& entry) {
  ReadResult r = read_file(layout.allocs_dir() + "/" + entry.name);
  if (!r.ok()) return std::nullopt;
  auto rec = parse_alloc_record(r.data);
  if (!rec.ok()) return std::nullopt;
  return std::move(*rec);
}

static bool is_record_name(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;  // temp files and the allocation lock
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
}

// Takes a new listing into the cache: a record whose file is unchanged is kept with its owner
// file, a new one read. One that cannot be read is left out, and read again at the next scan.
static void take_listing(const Layout& layout, const std::vector<DirEntry>& entries, RecordCache& cache) {
  std::map<std::string, CachedRecord> listed;
  std::size_t owners_open = 0;
  for (const DirEntry& entry : entries) {
    if (!is_record_name(entry.name)) continue;
    if (auto it = cache.records.find(entry.name); it != cache.records.end() && it->second.ino == entry.ino) {
      if (it->second.owner.get() >= 0) ++owners_open;
      listed.insert(cache.records.extract(it));
      continue;
    }
    auto rec = read_record(layout, entry);
    if (!rec) {
      cache.listing.invalidate();
      continue;
    }
    listed.emplace(entry.name, CachedRecord{entry.ino, std::move(*rec), OwnedFd()});
  }
  cache.records = std::move(listed);
  cache.owners_open = owners_open;
}

static void sort_views(std::vector<AllocView>& views) {
  std::sort(views.begin(), views.end(), [](const AllocView& a, const AllocView& b) {
    if (a.rec.created_ns != b.rec.created_ns) return a.rec.created_ns < b.rec.created_ns;
    return a.rec.id < b.rec.id;
  });
}

static Result<std::vector<AllocView>> scan_cached(const Layout& layout, const Config& config, std::int64_t now_ns,
                                                  RecordCache& cache, std::optional<unsigned> only_gpu) {
  auto listing = cache.listing.list_if_changed(layout.allocs_dir());
  if (!listing.ok()) return Error{listing.error().message};
  if (*listing) take_listing(layout, **listing, cache);
  std::vector<AllocView> views;
  for (auto& [name, kept] : cache.records) {
    if (only_gpu && kept.rec.gpu != *only_gpu) continue;
    if (auto v = observe_kept(layout, config, kept, cache, now_ns)) views.push_back(std::move(*v));
  }
  sort_views(views);
  return views;
}

Result<std::vector<AllocView>> scan_allocations(const Layout& layout, const Config& config,
                                                std::int64_t now_ns, RecordCache* cache,
                                                std::optional<unsigned> only_gpu) {
  if (cache != nullptr) return scan_cached(layout, config, now_ns, *cache, only_gpu);
  auto entries = list_dir_entries(layout.allocs_dir());
  if (!entries.ok()) return Error{entries.error().message};
  std::vector<AllocView> views;
  for (const DirEntry& entry : *entries) {
    if (!is_record_name(entry.name)) continue;
    auto rec = read_record(layout, entry);
    if (!rec) continue;
    if (only_gpu && rec->gpu != *only_gpu) continue;
    if (auto v = observe(layout, config, std::move(*rec), now_ns)) views.push_back(std::move(*v));
  }
  sort_views(views);
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
