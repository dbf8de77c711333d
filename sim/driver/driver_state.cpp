#include "driver/driver_state.hpp"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/clock.hpp"
#include "common/file_io.hpp"
#include "common/watched_listing.hpp"
#include "driver/device_files.hpp"

// libstdc++'s own release of its emergency exception arena (the hook valgrind calls).
namespace __gnu_cxx {
void __freeres() noexcept;
}  // namespace __gnu_cxx

namespace gpusim::driver {

namespace {

// The code of the fault injected for `symbol` on `gpu`, after its hang (the caller holds the
// library's lock, so every other call of the process waits too, as behind a stuck driver).
std::optional<int> apply_fault(const Config& config, const char* symbol, std::optional<unsigned> gpu) {
  const Fault* fault = find_fault(config, symbol, gpu);
  if (fault == nullptr) return std::nullopt;
  if (fault->hang_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(fault->hang_ms));
  return fault->code;
}

constexpr std::uint64_t kHandleMagic = 0x67707573696d4456ULL;  // "gpusimDV"

// Enough of a file's identity to notice `gpusim` replacing it (write temp + rename).
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  std::int64_t mtime_ns = 0;
  off_t size = 0;
  bool operator==(const FileId&) const = default;
};

std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino,
                static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec,
                st.st_size};
}

struct DriverState {
  std::mutex mu;
  unsigned refcount = 0;
  std::optional<Layout> layout;
  Config config;
  std::optional<FileId> config_id;
  WatchedFile config_watch{kClientWatchAfter};  // config.json is looked at again only after its name's events
  nvmlDevice_st slots[kMaxGpus][1 + kMaxMigSlots] = {};
  DeviceFiles files;  // held from the first init to the last shutdown
  RecordCache records;  // allocation records parsed by earlier calls of this init session
};

DriverState& state() {
  static DriverState s;
  return s;
}

// A forked child shares the parent's inotify descriptions (common/watched_listing.hpp): it
// drops its copies and watches for itself. (glibc forgets the handler if the library is unloaded.)
void watch_anew_in_child() {
  state().config_watch.close();
  state().records.listing.close();
}
[[maybe_unused]] const int kWatchAnewInChild = ::pthread_atfork(nullptr, nullptr, watch_anew_in_child);

// The library carries its own C++ runtime (sim/CMakeLists.txt), whose emergency exception arena
// is allocated when the library loads. Freed when it is unloaded: a client that closes the
// library (gpureap, under LeakSanitizer in our tests) would otherwise find it leaked.
[[gnu::destructor]] void free_cxx_runtime() { __gnu_cxx::__freeres(); }

// Marks the slots the configuration uses. Slot addresses never change, so handles taken
// before a reconfiguration stay valid pointers (and are rejected if their slot went away).
void apply_config(DriverState& s, Config config) {
  s.config = std::move(config);
  for (unsigned g = 0; g < kMaxGpus; ++g) {
    for (unsigned m = 0; m < 1 + kMaxMigSlots; ++m) {
      nvmlDevice_st& d = s.slots[g][m];
      d.magic = kHandleMagic;
      d.gpu = g;
      d.mig_slot = static_cast<int>(m) - 1;
      bool gpu_present = g < s.config.gpus.size();
      d.present = gpu_present && (m == 0 || (s.config.gpus[g].mig_enabled &&
                                             m - 1 < s.config.gpus[g].mig.size()));
    }
  }
}

// Picks up a configuration `gpusim` has replaced. A config that vanished or does not parse
// keeps the last good one: a running driver does not forget its GPUs.
void refresh(DriverState& s) {
  if (!s.layout || !s.config_watch.may_have_changed(s.layout->config())) return;
  auto id = file_id(s.layout->config());
  if (!id || id == s.config_id) return;
  auto cfg = load_config(s.layout->config());
  if (!cfg.ok()) {
    s.config_watch.invalidate();  // looked at again at the next call, as a file being written
    return;
  }
  s.config_id = id;
  apply_config(s, std::move(*cfg));
}

}  // namespace

Call::Call(const char* symbol) : lock_(state().mu), symbol_(symbol) {
  DriverState& s = state();
  if (s.refcount == 0) {
    rc_ = NVML_ERROR_UNINITIALIZED;
    return;
  }
  refresh(s);
  if (auto code = apply_fault(s.config, symbol_, std::nullopt)) rc_ = *code;
}

nvmlReturn_t Call::resolve(nvmlDevice_t handle, Target* out, OnLost on_lost) {
  DriverState& s = state();
  if (handle == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Validate by address before touching it: a foreign pointer must not be dereferenced.
  auto addr = reinterpret_cast<std::uintptr_t>(handle);
  auto base = reinterpret_cast<std::uintptr_t>(&s.slots[0][0]);
  auto end = base + sizeof(s.slots);
  if (addr < base || addr >= end || (addr - base) % sizeof(nvmlDevice_st) != 0) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const nvmlDevice_st& d = *handle;
  if (d.magic != kHandleMagic || !d.present || d.gpu >= s.config.gpus.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (auto code = apply_fault(s.config, symbol_, d.gpu)) return *code;
  const Gpu& gpu = s.config.gpus[d.gpu];
  if (gpu.lost && on_lost == OnLost::Fail) return NVML_ERROR_GPU_IS_LOST;
  out->handle = handle;
  out->gpu_index = d.gpu;
  out->gpu = &gpu;
  out->mig = d.mig_slot >= 0 ? &gpu.mig[static_cast<unsigned>(d.mig_slot)] : nullptr;
  return NVML_SUCCESS;
}

std::optional<int> Call::gpu_fault(unsigned gpu) const {
  return apply_fault(state().config, symbol_, gpu);
}

const Config& Call::config() const { return state().config; }
const Layout& Call::layout() const { return *state().layout; }

nvmlReturn_t Call::attach_gpu(unsigned gpu) {
  DriverState& s = state();
  return s.files.open_gpu(s.layout->gpu_dev(s.config.gpus[gpu].minor));
}

nvmlDevice_t Call::physical_handle(unsigned gpu) const { return &state().slots[gpu][0]; }
nvmlDevice_t Call::mig_handle(unsigned gpu, unsigned slot) const {
  return &state().slots[gpu][1 + slot];
}

std::optional<std::vector<AllocView>> Call::scan(unsigned gpu) const {
  auto views = scan_allocations(layout(), config(), realtime_ns(), &state().records, gpu);
  if (!views.ok()) return std::nullopt;
  return std::move(*views);
}

nvmlReturn_t driver_init(const char* symbol, unsigned flags, bool legacy_v1) {
  DriverState& s = state();
  std::lock_guard lock(s.mu);
  // A library without its kernel driver: no state directory, no config, or no control node.
  auto dir = state_dir_from_env();
  if (!dir) return NVML_ERROR_DRIVER_NOT_LOADED;
  Layout layout(*dir);
  auto id = file_id(layout.config());
  ReadResult raw = read_file(layout.config());
  if (!raw.ok()) return raw.error.missing ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_ERROR_NO_PERMISSION;
  if (::access(layout.dev("nvidiactl").c_str(), F_OK) != 0) return NVML_ERROR_DRIVER_NOT_LOADED;
  auto cfg = parse_config(raw.data);
  if (!cfg.ok()) return NVML_ERROR_UNKNOWN;
  if (auto code = apply_fault(*cfg, symbol, std::nullopt)) return *code;
  if (cfg->gpus.empty() && !(flags & NVML_INIT_FLAG_NO_GPUS)) return NVML_ERROR_DRIVER_NOT_LOADED;
  if (legacy_v1) {
    for (const Gpu& g : cfg->gpus) {
      if (g.lost) return NVML_ERROR_GPU_IS_LOST;
    }
  }
  if (s.refcount == 0) {
    if (auto rc = s.files.open_control(layout.dev("nvidiactl"))) return rc;
    s.layout = std::move(layout);
    s.config_id = id;
    apply_config(s, std::move(*cfg));
  }
  ++s.refcount;
  return NVML_SUCCESS;
}

nvmlReturn_t driver_shutdown() {
  DriverState& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return NVML_ERROR_UNINITIALIZED;
  if (--s.refcount == 0) {
    apply_config(s, Config{});  // every handle slot becomes invalid
    s.files.close_all();
    s.layout.reset();
    s.config_id.reset();
    s.records.clear();
  }
  return NVML_SUCCESS;
}

nvmlReturn_t copy_out(const std::string& s, char* buf, unsigned length) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < s.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

}  // namespace gpusim::driver
