#include "cuda/contexts.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <fmt/core.h>
#include <map>
#include <set>

#include "common/alloc_scan.hpp"
#include "common/clock.hpp"
#include "common/file_io.hpp"
#include "common/size.hpp"
#include "cuda/pidns.hpp"

namespace gpusim::cuda {

Result<Owner> identify_self() {
  Owner o;
  char buf[64];
  ssize_t n = read_host_pid_link(buf, sizeof buf - 1);
  if (n <= 0) return Error{std::string("readlink of the host's /proc/self: ") + errno_text(errno)};
  auto [p, ec] = std::from_chars(buf, buf + n, o.host_pid);
  if (ec != std::errc() || p != buf + n) return Error{"the host's /proc/self does not name a PID"};
  o.ns_pid = static_cast<unsigned>(::getpid());
  ReadResult comm = read_file("/proc/self/comm");
  o.name = comm.ok() ? comm.data.substr(0, comm.data.find('\n')) : "gpusim-cuda";
  return o;
}

namespace {

// Validates --alloc against the machine; returns the MIG instance of each spec (or null).
Result<std::vector<const MigInstance*>> resolve_specs(const Config& config, const Options& opts) {
  std::vector<const MigInstance*> out;
  for (const AllocSpec& s : opts.allocs) {
    if (s.gpu >= config.gpus.size()) {
      return Error{fmt::format("--alloc on GPU {}: no such GPU (the machine has {})", s.gpu,
                               config.gpus.size())};
    }
    const Gpu& g = config.gpus[s.gpu];
    if (g.lost) return Error{fmt::format("GPU {} ({}) is lost: cannot create a context", s.gpu, g.pci_bus_id())};
    const MigInstance* inst = nullptr;
    if (g.mig_enabled) {
      if (!s.gi) {
        return Error{fmt::format("GPU {} is in MIG mode: name an instance as GPU:SIZE:TYPE:GI (GIs: {})",
                                 s.gpu, [&] {
                                   std::string l;
                                   for (const auto& m : g.mig) l += (l.empty() ? "" : ",") + std::to_string(m.gi);
                                   return l;
                                 }())};
      }
      for (const auto& m : g.mig) {
        if (m.gi == *s.gi) inst = &m;
      }
      if (!inst) return Error{fmt::format("GPU {} has no MIG GPU instance {}", s.gpu, *s.gi)};
    } else if (s.gi) {
      return Error{fmt::format("GPU {} is not in MIG mode: drop the GI field", s.gpu)};
    }
    out.push_back(inst);
  }
  return out;
}

int open_inheritable(const std::string& path, AttachError* err) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDWR);  // no O_CLOEXEC: CUDA's descriptors survive fork/exec
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    err->message = errno == ENOENT
                       ? fmt::format("{}: missing: no CUDA-capable device is detected", path)
                       : fmt::format("{}: {}", path, errno_text(errno));
    err->exit_status = kExitError;
  }
  return fd;
}

}  // namespace

Result<std::vector<int>> open_device_files(const Layout& layout, const Config& config,
                                           const Options& opts, AttachError* err) {
  auto insts = resolve_specs(config, opts);
  if (!insts.ok()) {
    err->message = insts.error().message;
    return Error{err->message};
  }
  std::vector<std::string> paths;
  // An MPS client's contexts live in its server, which holds the device files.
  if (!opts.allocs.empty() && opts.mps_server_pid == 0) {
    paths.push_back(layout.dev("nvidiactl"));
    paths.push_back(layout.dev("nvidia-uvm"));
    std::set<unsigned> gpus;
    std::set<unsigned> caps;
    for (std::size_t i = 0; i < opts.allocs.size(); ++i) {
      gpus.insert(opts.allocs[i].gpu);
      if (const MigInstance* m = (*insts)[i]) {
        caps.insert(m->cap_gi_minor);
        caps.insert(m->cap_ci_minor);
      }
    }
    for (unsigned g : gpus) paths.push_back(layout.gpu_dev(config.gpus[g].minor));
    for (unsigned c : caps) paths.push_back(layout.cap_dev(c));
  }
  std::vector<int> fds;
  for (const auto& p : paths) {
    int fd = open_inheritable(p, err);
    if (fd < 0) {
      for (int f : fds) ::close(f);
      return Error{err->message};
    }
    fds.push_back(fd);
  }
  return fds;
}

Result<std::vector<ContextLocks>> create_contexts(const Layout& layout, const Config& config,
                                                  const Options& opts, const Owner& owner,
                                                  AttachError* err) {
  auto fail = [&](std::string msg, int status) -> Result<std::vector<ContextLocks>> {
    err->message = std::move(msg);
    err->exit_status = status;
    return Error{err->message};
  };
  if (opts.allocs.empty()) return std::vector<ContextLocks>{};
  auto insts = resolve_specs(config, opts);
  if (!insts.ok()) return fail(insts.error().message, kExitError);

  // Any user's program may allocate. Made 0666 in one step: a second user's program that
  // opened it while it still had its maker's umask's mode failed (two users' jobs starting
  // together on one Slurm node).
  auto lock = open_or_create_shared(layout.alloc_lock(), 0666);
  if (!lock.ok()) return fail(lock.error().message, kExitError);
  int lock_fd = *lock;
  while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock_fd};

  // Capacity, before this process holds any context (an owner must not probe its own locks).
  auto views = scan_allocations(layout, config, realtime_ns());
  if (!views.ok()) return fail(views.error().message, kExitError);
  std::map<std::pair<unsigned, unsigned>, std::uint64_t> want;  // (gpu, gi or ~0) -> bytes
  for (std::size_t i = 0; i < opts.allocs.size(); ++i) {
    const MigInstance* m = (*insts)[i];
    want[{opts.allocs[i].gpu, m ? m->gi : ~0u}] += opts.allocs[i].bytes;
  }
  for (const auto& [key, bytes] : want) {
    const Gpu& g = config.gpus[key.first];
    std::uint64_t capacity, used;
    if (key.second != ~0u) {
      const MigInstance* inst = nullptr;
      for (const auto& m : g.mig) {
        if (m.gi == key.second) inst = &m;
      }
      capacity = inst->memory_total;
      used = allocated_bytes_on_instance(*views, key.first, key.second);
    } else {
      capacity = g.memory_total > g.memory_reserved ? g.memory_total - g.memory_reserved : 0;
      used = g.base_used + allocated_bytes(*views, key.first);
    }
    std::uint64_t free = capacity > used ? capacity - used : 0;
    if (bytes > free) {
      std::string where = key.second != ~0u ? fmt::format("GPU {} MIG instance {}", key.first, key.second)
                                            : fmt::format("GPU {}", key.first);
      return fail(fmt::format("CUDA out of memory: tried to allocate {} on {}, {} free of {}", format_size(bytes),
                              where, format_size(free), format_size(capacity)),
                  kExitOutOfMemory);
    }
  }

  std::vector<ContextLocks> contexts;
  std::int64_t now = realtime_ns();
  // "<host pid>-<random>-<nn>": unique across PID reuse, and sorted in creation order.
  std::string id_prefix = fmt::format("{}-{}", owner.host_pid, random_hex(4));
  for (std::size_t i = 0; i < opts.allocs.size(); ++i) {
    const AllocSpec& s = opts.allocs[i];
    AllocRecord rec;
    rec.id = fmt::format("{}-{:02}", id_prefix, i);
    rec.gpu = s.gpu;
    if (const MigInstance* m = (*insts)[i]) {
      rec.gi = m->gi;
      rec.ci = m->ci;
    }
    rec.type = s.type;
    rec.bytes = s.bytes;
    rec.owner_pid = owner.host_pid;
    rec.owner_nspid = owner.ns_pid;
    rec.owner_name = owner.name;
    rec.release_delay_ms = opts.release_delay_ms;
    rec.leak = opts.leak;
    rec.created_ns = now;
    rec.sm_util = opts.sm_util;
    rec.mem_util = opts.mem_util;
    rec.mps_server_pid = opts.mps_server_pid;
    auto locks = acquire_context_locks(layout.alloc_hold(rec.id), layout.alloc_owner(rec.id));
    if (!locks.ok()) return fail(locks.error().message, kExitError);
    contexts.push_back(*locks);
    if (auto st = write_file_atomic(layout.alloc_json(rec.id), serialize_alloc_record(rec), 0666); !st.ok()) {
      return fail(st.error().message, kExitError);
    }
  }
  return contexts;
}

}  // namespace gpusim::cuda
