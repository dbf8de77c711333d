// The /proc scanner: lists the PIDs, reads them (in parallel when there are many: the work
// is system calls, which scale with cores), then builds the parent → children index and
// reads the details of every GPU device holder. In the Holders scope (ps) most processes get
// only a look at their fd/ (DeviceFdProbe) and the table is filled around the holders.
#include "proc/process_table.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <exception>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_set>

#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "proc/ancestry.hpp"
#include "proc/device_fd_probe.hpp"
#include "proc/parse_util.hpp"
#include "proc/proc_io.hpp"
#include "proc/process_reader.hpp"

namespace gpureap {
namespace {

using procfs::unique_fd;

// PROC_PID_INIT_INO: the inode number the kernel gives the initial PID namespace.
constexpr std::string_view kInitPidNamespace = "pid:[4026531836]";
// One more thread per this many processes: the holders' details, read in phase 1, make a
// second thread pay from about this many (docs/performance.md, the /proc scan).
constexpr std::size_t kPidsPerExtraThread = 100;
constexpr unsigned kMaxThreads = 4;
// PIDs a thread takes at a time: few, since holders (each ~10 times the cost of another
// process) come in runs of neighbouring PIDs (a job and its forked workers).
constexpr std::size_t kChunk = 8;

double clock_seconds(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// CPUs this process may run on (taskset, cpuset), at least 1.
unsigned usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// The PIDs of a children file, in its order.
void append_pids(std::string_view text, std::vector<pid_t>& pids) {
  for (std::string_view token = procfs::take_token(text); !token.empty(); token = procfs::take_token(text)) {
    pid_t pid = 0;
    if (procfs::parse_whole_unsigned(token, pid)) pids.push_back(pid);
  }
}

unique_fd open_root(const std::string& proc_root) {
  return procfs::open_dir_at(AT_FDCWD, proc_root.c_str(), /*no_follow=*/false);
}

}  // namespace

class ProcessTableBuilder {
 public:
  explicit ProcessTableBuilder(ProcessTable& table) : table_(table) {}

  void scan(int root_fd);
  void load_details(int root_fd, std::span<const pid_t> pids);
  void load_trees(int root_fd, std::span<const pid_t> roots);

 private:
  void open_root(int root_fd);
  void read_clock(int root_fd);
  std::vector<pid_t> list_pids(int root_fd);
  // quick_proofs: holders with known GPU descriptors have only those checked (only_pids).
  void read_all(int root_fd, const std::vector<pid_t>& pids, bool holders_only, bool quick_proofs = false);
  using QuietSeen = std::vector<std::pair<pid_t, FdLookMemory::Quiet>>;
  using DetailsSeen = std::vector<std::pair<pid_t, FdLookMemory::Details>>;
  struct ParallelRead;
  void read_share(int root_fd, ParallelRead& read, unsigned slot);
  void keep_read(ParallelRead& read);
  void complete_holders(int root_fd);
  bool read_one(int root_fd, pid_t pid);
  static bool still_quiet(const FdLookMemory& memory, pid_t pid,
                          std::vector<std::pair<pid_t, FdLookMemory::Quiet>>& carried);
  void add(ProcessInfo&& info);
  void collect_tree(int root_fd, pid_t root, std::vector<pid_t>& out);
  std::vector<pid_t> children_for_tree(int root_fd, pid_t pid);
  bool read_children_files(int root_fd, pid_t pid, std::vector<pid_t>& children);
  int kept_children_file(const ProcessInfo& info) const;
  bool read_children_file(int fd, std::vector<pid_t>& children);
  void read_everything(int root_fd);
  void build_children();
  procfs::ProcessReader& reader();

  ProcessTable& table_;
  procfs::ScanClock clock_;
  bool is_procfs_ = false;  // proc_root is a procfs mount, not a fixture tree
  std::optional<procfs::ProcessReader> reader_;  // for reads one at a time
  procfs::ReadBuffer buffer_{1024};
  procfs::DirLister lister_;
  // While the processes around an event-kept set's holders are read: their stat alone. The
  // events say they hold no GPU file (one received without an open shows at the next walk).
  bool around_by_stat_ = false;
  // The PIDs a full Holders scan without a memory probed, sorted: one of them not in the table
  // had no GPU file at its probe, so only its stat is read when it is needed around a holder.
  std::vector<pid_t> probed_;
};

void ProcessTableBuilder::open_root(int root_fd) {
  struct statfs fs {};
  is_procfs_ = fstatfs(root_fd, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
  read_clock(root_fd);
}

procfs::ProcessReader& ProcessTableBuilder::reader() {
  if (!reader_) reader_.emplace(clock_, table_.options_.dev_dir, is_procfs_);
  return *reader_;
}

void ProcessTableBuilder::scan(int root_fd) {
  open_root(root_fd);
  if (is_procfs_) {
    // Our own PID namespace as this /proc shows it; fixture trees have none.
    const auto ns = buffer_.read_link_at(root_fd, "self/ns/pid");
    table_.in_child_pid_namespace_ = ns.has_value() && *ns != kInitPidNamespace;
  }
  const bool holders_only = table_.options_.scope == ProcScanScope::Holders && is_procfs_;
  table_.complete_ = !holders_only;
  const auto& only = table_.options_.only_pids;
  std::vector<pid_t> listed = holders_only && only ? std::vector<pid_t>{} : list_pids(root_fd);
  read_all(root_fd, holders_only && only ? *only : listed, holders_only, holders_only && only);
  // With a memory, a PID remembered quiet was not looked at this time: not probed.
  if (holders_only && !only && !table_.options_.memory) {
    probed_ = std::move(listed);
    std::sort(probed_.begin(), probed_.end());
  }
  if (holders_only) {
    around_by_stat_ = only != nullptr;
    complete_holders(root_fd);
    around_by_stat_ = false;
    probed_.clear();
  }
  build_children();

  // Holders have their details from phase 1 (ProcessReader::read); any left are read now.
  std::vector<pid_t> holders;
  for (const auto& [pid, info] : table_.processes_) {
    if (info.holds_any_gpu_file() && !info.details_loaded) holders.push_back(pid);
  }
  std::sort(holders.begin(), holders.end());
  load_details(root_fd, holders);
}

// Phase 1 reads a holder's details on the scan's threads; the user names, cached per table,
// are looked up here on one.
void ProcessTableBuilder::add(ProcessInfo&& info) {
  if (info.details_loaded) info.user = table_.user_names_.name(info.uid);
  const pid_t pid = info.pid;
  table_.processes_.emplace(pid, std::move(info));
}

void ProcessTableBuilder::read_clock(int root_fd) {
  const long ticks = sysconf(_SC_CLK_TCK);
  table_.clock_ticks_ = ticks > 0 ? ticks : 100;
  clock_.ticks_per_second = static_cast<double>(table_.clock_ticks_);
  const long page = sysconf(_SC_PAGESIZE);
  clock_.page_size = page > 0 ? static_cast<std::uint64_t>(page) : 4096;
  clock_.now_unix = clock_seconds(CLOCK_REALTIME);
  // For the live /proc the clocks give boot time exactly (btime is whole seconds);
  // a fixture tree brings its own btime in <root>/stat.
  table_.boot_time_unix_ = clock_.now_unix - clock_seconds(CLOCK_BOOTTIME);
  if (!is_procfs_) {
    procfs::ReadBuffer buffer;
    if (const auto text = buffer.read_file_at(root_fd, "stat")) {
      std::string_view rest = *text;
      while (!rest.empty()) {
        std::string_view line = procfs::take_line(rest);
        if (!line.starts_with("btime ")) continue;
        line.remove_prefix(6);
        std::uint64_t btime = 0;
        if (procfs::take_unsigned(line, btime)) table_.boot_time_unix_ = static_cast<double>(btime);
        break;
      }
    }
  }
  clock_.boot_time_unix = table_.boot_time_unix_;
}

std::vector<pid_t> ProcessTableBuilder::list_pids(int root_fd) {
  std::vector<pid_t> pids;
  pids.reserve(1024);
  procfs::DirLister lister;
  lister.for_each(root_fd, [&pids](const char* name, unsigned char) {
    pid_t pid = 0;
    if (procfs::parse_pid_name(name, pid)) pids.push_back(pid);
    return true;
  });
  return pids;
}

// One parallel read: the PIDs, what each thread read and saw, and the next PID to take.
struct ProcessTableBuilder::ParallelRead {
  ParallelRead(const std::vector<pid_t>& pids_to_read, bool holders, bool quick, FdLookMemory* look_memory,
               unsigned thread_count)
      : pids(pids_to_read),
        holders_only(holders),
        quick_proofs(quick),
        memory(look_memory),
        threads(thread_count),
        results(thread_count),
        errors(thread_count),
        quiet(thread_count),
        details(thread_count),
        file_budget(look_memory != nullptr ? static_cast<std::ptrdiff_t>(kMaxKeptHolderFiles) -
                                                 static_cast<std::ptrdiff_t>(look_memory->files_kept())
                                           : 0) {}

  const std::vector<pid_t>& pids;
  const bool holders_only;
  const bool quick_proofs;  // see read_all
  // The memory is read by every thread and rewritten once they are done (what each saw quiet).
  FdLookMemory* const memory;
  const unsigned threads;
  std::vector<std::vector<ProcessInfo>> results;
  std::vector<std::exception_ptr> errors;
  std::vector<QuietSeen> quiet;
  std::vector<DetailsSeen> details;
  std::atomic<std::ptrdiff_t> file_budget;  // holders whose files may be kept yet
  std::atomic<std::size_t> next{0};
};

void ProcessTableBuilder::read_all(int root_fd, const std::vector<pid_t>& pids, bool holders_only, bool quick_proofs) {
  const auto threads = static_cast<unsigned>(std::min<std::size_t>(
      {usable_cpus(), kMaxThreads, 1 + pids.size() / kPidsPerExtraThread}));
  ParallelRead read(pids, holders_only, quick_proofs, holders_only ? table_.options_.memory.get() : nullptr, threads);
  std::vector<std::thread> helpers;
  helpers.reserve(threads - 1);
  for (unsigned slot = 1; slot < threads; ++slot) {
    try {
      helpers.emplace_back([this, root_fd, &read, slot] { read_share(root_fd, read, slot); });
    } catch (const std::system_error&) {
      break;  // no thread to be had (RLIMIT_NPROC): the others take its share
    }
  }
  read_share(root_fd, read, 0);
  for (std::thread& helper : helpers) helper.join();
  for (const std::exception_ptr& error : read.errors) {
    if (error) std::rethrow_exception(error);
  }
  keep_read(read);
}

// One thread's share: PIDs taken a chunk at a time; in the Holders scope each gets a look at
// its fd/ first, and a full read only when it holds a GPU device file.
void ProcessTableBuilder::read_share(int root_fd, ParallelRead& read, unsigned slot) {
  const std::vector<pid_t>& pids = read.pids;
  FdLookMemory* memory = read.memory;
  try {
    procfs::ProcessReader reader(clock_, table_.options_.dev_dir, is_procfs_);
    if (memory != nullptr) reader.remember_details(memory, &read.details[slot], &read.file_budget);
    std::optional<procfs::DeviceFdProbe> probe;
    if (read.holders_only) probe.emplace(table_.options_.dev_dir, is_procfs_);
    std::vector<DeviceFileHandle> held;
    std::vector<ProcessInfo>& out = read.results[slot];
    out.reserve(pids.size() / read.threads + kChunk);
    for (;;) {
      const std::size_t begin = read.next.fetch_add(kChunk, std::memory_order_relaxed);
      if (begin >= pids.size()) break;
      const std::size_t end = std::min(pids.size(), begin + kChunk);
      for (std::size_t i = begin; i < end; ++i) {
        std::optional<ProcessInfo> info;
        if (probe) {
          if (memory != nullptr && still_quiet(*memory, pids[i], read.quiet[slot])) continue;
          if (read.quick_proofs && memory != nullptr) {
            if (const FdLookMemory::Details* known = memory->files_known(pids[i])) {
              info = reader.read_known_holder(root_fd, pids[i], *known);
              if (info) {
                out.push_back(std::move(*info));
                continue;
              }
            }
          }
          const procfs::FdProbe seen = probe->probe(root_fd, pids[i], held);
          const bool holds_none = seen == procfs::FdProbe::OtherFiles || seen == procfs::FdProbe::EmptyAlive;
          if (holds_none && memory != nullptr) {
            // Seen for the first time: its next look is staggered by PID, so that each round
            // looks at an even share of the processes; afterwards every full_look_every rounds.
            const unsigned every = memory->full_look_every_;
            const bool known = memory->quiet_.count(pids[i]) > 0;
            const unsigned wait = known ? every : 1 + static_cast<unsigned>(pids[i]) % every;
            read.quiet[slot].emplace_back(pids[i], FdLookMemory::Quiet{wait + memory->round_});
          }
          if (holds_none || seen == procfs::FdProbe::Gone) continue;
          info = seen == procfs::FdProbe::NoFiles ? reader.read_without_files(root_fd, pids[i])
                                                  : reader.read(root_fd, pids[i], &held);
        } else {
          info = reader.read(root_fd, pids[i]);
        }
        if (info) {
          out.push_back(std::move(*info));
        }
      }
    }
  } catch (...) {
    read.errors[slot] = std::current_exception();
  }
}

// Every thread's processes into the table, and what they saw into the memory.
void ProcessTableBuilder::keep_read(ParallelRead& read) {
  auto& processes = table_.processes_;
  processes.reserve(read.pids.size());
  for (std::vector<ProcessInfo>& part : read.results) {
    for (ProcessInfo& info : part) add(std::move(info));
  }
  FdLookMemory* memory = read.memory;
  if (memory != nullptr) {
    // What was not seen quiet this round (gone, or now a holder) is forgotten.
    memory->quiet_.clear();
    for (const auto& part : read.quiet) memory->quiet_.insert(part.begin(), part.end());
    memory->details_.clear();
    for (auto& part : read.details) {
      for (auto& [pid, d] : part) memory->details_.insert_or_assign(pid, std::move(d));
    }
    ++memory->round_;
  }
}

// A process remembered quiet and not yet due for another look: carried into this round's
// memory, at no system call.
bool ProcessTableBuilder::still_quiet(const FdLookMemory& memory, pid_t pid,
                                      std::vector<std::pair<pid_t, FdLookMemory::Quiet>>& carried) {
  const auto it = memory.quiet_.find(pid);
  if (it == memory.quiet_.end() || memory.round_ >= it->second.due_round) return false;
  carried.emplace_back(pid, it->second);
  return true;
}

void ProcessTableBuilder::load_details(int root_fd, std::span<const pid_t> pids) {
  for (const pid_t pid : pids) {
    const auto it = table_.processes_.find(pid);
    if (it != table_.processes_.end()) reader().read_details(root_fd, it->second, table_.user_names_);
  }
}

// Phase 1 for one process the scan left out; true when it is (now) in the table.
bool ProcessTableBuilder::read_one(int root_fd, pid_t pid) {
  if (table_.processes_.count(pid) > 0) return true;
  // A full scan that did not see it: the process is newer than the snapshot and stays out.
  if (table_.complete_ || pid <= 0) return false;
  const bool by_stat = around_by_stat_ || std::binary_search(probed_.begin(), probed_.end(), pid);
  std::optional<ProcessInfo> info = by_stat ? reader().read_without_files(root_fd, pid) : reader().read(root_fd, pid);
  if (!info) return false;
  add(std::move(*info));
  return true;
}

// What join_snapshot and the views need around each holder in the Holders scope: its
// ancestors (roles, ps --tree, JSON ancestry), its process-group leader (a missing one marks
// an orphan) and its descendants (ps --tree). Those a scan of the event-kept set did not read
// are not holders by the events: their stat is read, not their fd/.
void ProcessTableBuilder::complete_holders(int root_fd) {
  std::vector<pid_t> holders;
  for (const auto& [pid, info] : table_.processes_) {
    if (info.holds_any_gpu_file()) holders.push_back(pid);
  }
  std::sort(holders.begin(), holders.end());
  std::vector<pid_t> tree;
  for (const pid_t holder : holders) {
    // A copy: reading into the table may rehash it.
    const pid_t pgid = table_.processes_.at(holder).pgid;
    ancestry_walk(holder, [this, root_fd](pid_t at) -> std::optional<pid_t> {
      if (!read_one(root_fd, at)) return std::nullopt;
      return table_.processes_.at(at).ppid;
    });
    if (pgid > 0) read_one(root_fd, pgid);
    collect_tree(root_fd, holder, tree);
  }
}

// root and its descendants, read into the table and appended to `out` (root alone in a
// Holders scan without descendants).
void ProcessTableBuilder::collect_tree(int root_fd, pid_t root, std::vector<pid_t>& out) {
  if (!read_one(root_fd, root)) return;
  if (!table_.complete_ && !table_.options_.descendants) {
    out.push_back(root);
    return;
  }
  std::vector<pid_t> stack{root};
  while (!stack.empty()) {
    const pid_t pid = stack.back();
    stack.pop_back();
    out.push_back(pid);
    for (const pid_t child : children_for_tree(root_fd, pid)) {
      // A child that exited since its parent's listing may have a new, unrelated owner.
      if (read_one(root_fd, child) && table_.processes_.at(child).ppid == pid) stack.push_back(child);
    }
  }
}

std::vector<pid_t> ProcessTableBuilder::children_for_tree(int root_fd, pid_t pid) {
  if (!table_.complete_) {
    if (const auto it = table_.children_read_.find(pid); it != table_.children_read_.end()) return it->second;
    std::vector<pid_t> children;
    if (read_children_files(root_fd, pid, children)) {
      table_.children_read_.emplace(pid, children);
      return children;
    }
    read_everything(root_fd);  // a kernel without /proc/<pid>/task/<tid>/children
  }
  return table_.children_of(pid);
}

// The children of every thread of pid (CONFIG_PROC_CHILDREN). False when this kernel has no
// such files; a process that has gone has no children.
bool ProcessTableBuilder::read_children_files(int root_fd, pid_t pid, std::vector<pid_t>& children) {
  char path[48];
  const auto end = std::to_chars(path, path + 16, pid).ptr;
  std::string_view("/task").copy(end, 5);
  end[5] = '\0';
  std::vector<std::string> tids;
  unique_fd tasks;
  const ProcessInfo* info = table_.find(pid);
  if (info != nullptr && info->threads == 1) {
    if (const auto kept = kept_children_file(*info); kept >= 0) return read_children_file(kept, children);
    // One thread when its stat was read: its children file, without listing task/.
    const std::string_view name(path, static_cast<std::size_t>(end - path));
    tids.emplace_back(std::string(name) + "/task/" + std::string(name) + "/children");
  } else {
    tasks = procfs::open_dir_at(root_fd, path, /*no_follow=*/false);
    if (!tasks) return true;
    lister_.for_each(
        tasks.get(),
        [&tids](const char* name, unsigned char) {
          tids.emplace_back(std::string(name) + "/children");
          return true;
        },
        is_procfs_);
  }
  for (const std::string& file : tids) {
    const auto text = buffer_.read_file_at(tasks ? tasks.get() : root_fd, file.c_str());
    if (!text) {
      if (errno == ENOENT && faccessat(root_fd, "thread-self/children", F_OK, 0) != 0) return false;
      continue;  // that thread has exited
    }
    append_pids(*text, children);
  }
  return true;
}

// A holder's children file kept open since its full look (FdLookMemory), or -1.
int ProcessTableBuilder::kept_children_file(const ProcessInfo& info) const {
  const FdLookMemory* memory = table_.options_.memory.get();
  if (memory == nullptr) return -1;
  const auto files = memory->files_of(info.pid, info.start_time_ticks);
  return files != nullptr && files->children ? files->children.get() : -1;
}

// Through the kept file: a process reaped since has no children (its reads fail).
bool ProcessTableBuilder::read_children_file(int fd, std::vector<pid_t>& children) {
  if (const auto text = buffer_.read_kept_proc_file(fd, /*one_piece=*/false, 16u << 20)) append_pids(*text, children);
  return true;
}

// Fallback to the Everything scope: phase 1 for every process not yet in the table.
void ProcessTableBuilder::read_everything(int root_fd) {
  std::vector<pid_t> pids = list_pids(root_fd);
  std::erase_if(pids, [this](pid_t pid) { return table_.processes_.count(pid) > 0; });
  read_all(root_fd, pids, /*holders_only=*/false);
  table_.complete_ = true;
  build_children();
}

void ProcessTableBuilder::load_trees(int root_fd, std::span<const pid_t> roots) {
  open_root(root_fd);
  std::vector<pid_t> wanted;
  for (const pid_t root : roots) collect_tree(root_fd, root, wanted);
  build_children();
  // The scan has read the holders' details already (ps: every driver-listed PID and worker
  // holds a device file): read each process once.
  std::erase_if(wanted, [this](pid_t pid) {
    const auto it = table_.processes_.find(pid);
    return it != table_.processes_.end() && it->second.details_loaded;
  });
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  load_details(root_fd, wanted);
}

void ProcessTableBuilder::build_children() {
  auto& children = table_.children_;
  children.clear();
  for (const auto& [pid, info] : table_.processes_) children[info.ppid].push_back(pid);
  for (auto& [ppid, list] : children) std::sort(list.begin(), list.end());
}

ProcessTable ProcessTable::scan(const ProcScanOptions& options) {
  ProcessTable table;
  table.options_ = options;
  const unique_fd root = open_root(options.proc_root);
  if (!root) {
    throw std::system_error(errno, std::generic_category(),
                            "cannot open " + options.proc_root + " to list processes");
  }
  ProcessTableBuilder builder(table);
  builder.scan(root.get());
  return table;
}

void ProcessTable::load_trees(std::span<const pid_t> roots) {
  const unique_fd root = open_root(options_.proc_root);
  if (!root) return;
  ProcessTableBuilder builder(*this);
  builder.load_trees(root.get(), roots);
}

void ProcessTable::load_details(std::span<const pid_t> pids) {
  const unique_fd root = open_root(options_.proc_root);
  if (!root) return;
  ProcessTableBuilder builder(*this);
  builder.load_details(root.get(), pids);
}

const ProcessInfo* ProcessTable::find(pid_t pid) const {
  const auto it = processes_.find(pid);
  return it == processes_.end() ? nullptr : &it->second;
}

std::vector<pid_t> ProcessTable::children_of(pid_t pid) const {
  const auto it = children_.find(pid);
  return it == children_.end() ? std::vector<pid_t>{} : it->second;
}

std::vector<pid_t> ProcessTable::descendants_of(pid_t pid) const {
  std::vector<pid_t> descendants;
  std::unordered_set<pid_t> seen{pid};
  std::vector<pid_t> stack = children_of(pid);
  while (!stack.empty()) {
    const pid_t next = stack.back();
    stack.pop_back();
    if (!seen.insert(next).second) continue;
    descendants.push_back(next);
    const auto it = children_.find(next);
    if (it != children_.end()) stack.insert(stack.end(), it->second.begin(), it->second.end());
  }
  return descendants;
}

std::vector<pid_t> ProcessTable::ancestry(pid_t pid) const {
  return ancestry_walk(pid, [this](pid_t at) -> std::optional<pid_t> {
    const ProcessInfo* info = find(at);
    if (info == nullptr) return std::nullopt;
    return info->ppid;
  });
}

}  // namespace gpureap
