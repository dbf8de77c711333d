// Leftover IPC objects against real objects made by real child processes: what doctor would
// report, and what removal does to the system. Guards remove every object even on failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/ipc.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "doctor/ipc_leftovers.hpp"
#include "doctor/ipc_removal.hpp"

namespace gpureap {
namespace {

// Runs body in a forked child, which sends one number back (-1: failed) and then exits, or
// stays alive until the Child is destroyed. An exited child is reaped at once, so that its
// PID no longer exists when the test looks.
class Child {
 public:
  enum Fate { Exits, Stays };
  Child(Fate fate, const std::function<long()>& body) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      const long value = body();
      (void)!::write(fds[1], &value, sizeof value);
      while (fate == Stays) ::pause();
      ::_exit(0);
    }
    ::close(fds[1]);
    if (pid_ < 0 || ::read(fds[0], &value_, sizeof value_) != sizeof value_) value_ = -1;
    ::close(fds[0]);
    if (fate == Exits) end();
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { end(); }
  void end() {
    if (pid_ <= 0 || reaped_) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
    reaped_ = true;
  }
  pid_t pid() const { return pid_; }
  long value() const { return value_; }
  int id() const { return static_cast<int>(value_); }

 private:
  pid_t pid_ = -1;
  long value_ = -1;
  bool reaped_ = false;
};

struct ShmGuard {
  int id;
  ~ShmGuard() { if (id >= 0) ::shmctl(id, IPC_RMID, nullptr); }
};
struct SemGuard {
  int id;
  ~SemGuard() { if (id >= 0) ::semctl(id, 0, IPC_RMID); }
};
union SemArg {  // semctl's fourth argument, which the caller must declare
  int val;
  struct semid_ds* buf;
};

struct PathGuard {  // a file or a whole directory tree; symlinks are removed, not followed
  std::string path;
  ~PathGuard() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// No test may touch the host's /dev/shm: this process gets a mount namespace of its own with
// an empty tmpfs there (once; ctest runs each test in its own process). "" on success, else
// why not, for GTEST_SKIP.
std::string private_dev_shm() {
  static const std::string why = [] {
    if (::geteuid() != 0) return std::string("needs root to mount a private /dev/shm in a mount namespace");
    if (::unshare(CLONE_NEWNS) != 0) return fmt::format("unshare(CLONE_NEWNS): {}", std::strerror(errno));
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("gpureap-test", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777") != 0) {
      return fmt::format("cannot mount a private tmpfs on /dev/shm: {}", std::strerror(errno));
    }
    return std::string();
  }();
  return why;
}
#define REQUIRE_PRIVATE_DEV_SHM()                                   \
  if (const std::string why_not = private_dev_shm(); !why_not.empty()) \
  GTEST_SKIP() << why_not

std::string unique_name() {
  static int counter = 0;
  return fmt::format("gpureap-test-{}-{}", ::getpid(), counter++);
}

long make_segment() {
  const int id = ::shmget(IPC_PRIVATE, 64 * 1024, IPC_CREAT | 0600);
  void* memory = id < 0 ? reinterpret_cast<void*>(-1) : ::shmat(id, nullptr, 0);
  if (memory != reinterpret_cast<void*>(-1)) std::memset(memory, 0x5a, 4096);
  if (memory != reinterpret_cast<void*>(-1) && ::shmdt(memory) == 0) return id;
  if (id >= 0) ::shmctl(id, IPC_RMID, nullptr);  // no guard knows it
  return -1;
}

long make_semaphores(bool operate) {
  const int id = ::semget(IPC_PRIVATE, 2, IPC_CREAT | 0600);
  struct sembuf ops[2] = {{0, 1, 0}, {1, 1, 0}};
  if (id >= 0 && operate && ::semop(id, ops, 2) != 0) ::semctl(id, 0, IPC_RMID);
  return id >= 0 && ::semctl(id, 0, GETVAL) >= 0 ? id : -1;
}

enum class Hold { Nothing, OpenFd, Mapping };
// shm_open's name "/<name>" is the file <name> in /dev/shm.
long make_shm_file(const std::string& name, Hold hold) {
  const int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 || ::ftruncate(fd, 8192) != 0 || ::pwrite(fd, "x", 1, 4096) != 1) return -1;
  if (hold == Hold::Mapping &&
      ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED) {
    return -1;
  }
  if (hold != Hold::OpenFd) ::close(fd);
  return 0;
}

bool write_file(const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  out << "leftover";
  return static_cast<bool>(out);
}

// Objects made by a child that has exited since: what a crashed job leaves behind.
struct DeadSegment {
  Child creator{Child::Exits, make_segment};
  ShmGuard guard{creator.id()};
};
struct DeadSemSet {
  explicit DeadSemSet(bool operate) : creator(Child::Exits, [=] { return make_semaphores(operate); }) {}
  Child creator;
  SemGuard guard{creator.id()};
};
struct ShmFile {  // a unique name in /dev/shm, removed at the end of the test
  std::string name = unique_name();
  PathGuard guard{"/dev/shm/" + name};
};
struct DeadShmFile : ShmFile {
  Child creator{Child::Exits, [this] { return make_shm_file(name, Hold::Nothing); }};
};

// One find_ipc_leftovers, with look-ups of the objects a test made.
struct Scan {
  IpcLeftovers found;
  explicit Scan(const IpcScanOptions& options = {}) : found(find_ipc_leftovers(options)) {}
  template <typename T, typename Key>
  static const T* find(const std::vector<T>& items, const Key& key, Key T::*field) {
    const auto it = std::find_if(items.begin(), items.end(), [&](const T& i) { return i.*field == key; });
    return it == items.end() ? nullptr : &*it;
  }
  const SysvShmLeftover* shm(int id) const { return find(found.shm, id, &SysvShmLeftover::shmid); }
  const SysvSemLeftover* sem(int id) const { return find(found.semaphores, id, &SysvSemLeftover::semid); }
  const PosixShmLeftover* posix(const std::string& name) const {
    return find(found.posix, name, &PosixShmLeftover::name);
  }
};

std::string read_fixture(const char* name) {
  std::ifstream in(std::string(GPUREAP_FIXTURE_DIR) + "/sysvipc/" + name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// ---------------------------------------------------------------- parsers

TEST(IpcParse, ShmTableWithRssAndSwapColumns) {
  const auto rows = parse_sysv_shm_table(read_fixture("shm_rss"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].key, -1826786317);
  EXPECT_EQ(rows[0].shmid, 0);
  EXPECT_EQ(rows[0].mode, 0644u);
  EXPECT_EQ(rows[0].size_bytes, 65536u);
  EXPECT_EQ(rows[0].creator_pid, 3053);
  EXPECT_EQ(rows[0].ctime, 1795977361);
  EXPECT_EQ(rows[0].rss_bytes, 0u);
  EXPECT_EQ(rows[1].mode, 01600u);  // SHM_DEST: removed while still attached
  EXPECT_EQ(rows[1].attached, 2u);
  EXPECT_EQ(rows[1].last_pid, 41377);
  EXPECT_EQ(rows[1].rss_bytes, 1073741824u);
  EXPECT_EQ(rows[1].swap_bytes, 4096u);
  EXPECT_EQ(rows[2].size_bytes, 17179869184u);
  EXPECT_EQ(rows[2].uid, 1001u);
  EXPECT_EQ(rows[2].creator_uid, 1000u);
}

TEST(IpcParse, ShmTableWithoutRssColumns) {
  const auto rows = parse_sysv_shm_table(read_fixture("shm_no_rss"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].shmid, 98304);
  EXPECT_EQ(rows[0].size_bytes, 33554432u);
  EXPECT_EQ(rows[0].dtime, 1500000200);
  EXPECT_FALSE(rows[0].rss_bytes.has_value());
  EXPECT_EQ(rows[1].attached, 1u);
}

TEST(IpcParse, SemTable) {
  const auto rows = parse_sysv_sem_table(read_fixture("sem"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].nsems, 3u);
  EXPECT_EQ(rows[1].otime, 1795977400);
  EXPECT_EQ(rows[2].key, -559038737);
  EXPECT_EQ(rows[2].mode, 0660u);
  EXPECT_EQ(rows[2].nsems, 128u);
  EXPECT_EQ(rows[2].creator_uid, 110u);
  EXPECT_TRUE(rows[2].last_pids.empty());  // only semctl knows them
}

TEST(IpcParse, TruncatedFlippedAndGarbageInputNeverCrashes) {
  const auto check = [](const std::string& text) {
    const auto lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
    for (const auto& row : parse_sysv_shm_table(text)) EXPECT_GE(row.shmid, 0);
    EXPECT_LE(parse_sysv_shm_table(text).size(), lines);
    EXPECT_LE(parse_sysv_sem_table(text).size(), lines);
  };
  std::uint64_t state = 0x9e3779b97f4a7c15u;  // xorshift64: the same flips on every run
  const auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  for (const char* name : {"shm_rss", "shm_no_rss", "sem"}) {
    const std::string text = read_fixture(name);
    ASSERT_FALSE(text.empty()) << name;
    for (std::size_t length = 0; length <= text.size(); ++length) check(text.substr(0, length));
    for (int round = 0; round < 2000; ++round) {
      std::string flipped = text;
      for (int flips = 1 + static_cast<int>(next() % 4); flips > 0; --flips) {
        flipped[next() % flipped.size()] = static_cast<char>(next() & 0xff);
      }
      check(flipped);
    }
  }
  for (const char* garbage :  // wrong digits, out of range, too many fields: no row at all
       {"\n\n\n", "1 2 3", "-", "0 0 9999 1 1 1 1 1 1 1 1 1 1 1",
        "99999999999 0 600 1 1 1 1 1 1 1 1 1 1 1", "0 -4 600 1 1 1 1 1 1 1 1 1 1 1",
        "0 1 600 1 1 1 1 1 1 1 1 1 1 1 1 1 1", "0 1 600 18446744073709551616 1 1 1 1 1 1 1 1 1 1",
        "0 1 600 4 1 1 1 1 1 1 1 1 1 99999999999999999999", "0 1 600 3 1 1 1 1 x 1"}) {
    EXPECT_TRUE(parse_sysv_shm_table(garbage).empty()) << garbage;
    EXPECT_TRUE(parse_sysv_sem_table(garbage).empty()) << garbage;
  }
}

TEST(IpcParse, CreatorPidFromTorchShmNames) {
  EXPECT_EQ(creator_pid_from_shm_name("torch_1234_3809153727_0"), 1234);
  EXPECT_EQ(creator_pid_from_shm_name("torch_77_1"), 77);  // releases before the counter
  for (const char* other : {"torch_1234", "torch__1_2", "torch_0_1_2", "torch_1_2_3_4",
                            "torch_12a_1_2", "torch_1_2_", "torch_99999999999999_1_2",
                            "sem.torch_1_2_3", "psm_1f2e3d", "nccl-AbCdEf", ""}) {
    EXPECT_EQ(creator_pid_from_shm_name(other), std::nullopt) << other;
  }
}

// ---------------------------------------------------------------- System V

long attach(int id) { return ::shmat(id, nullptr, 0) == reinterpret_cast<void*>(-1) ? -1 : 0; }

TEST(IpcSysvShm, SegmentOfDeadCreatorIsReported) {
  const DeadSegment dead;
  ASSERT_GE(dead.guard.id, 0);
  const Scan scan;
  const SysvShmLeftover* segment = scan.shm(dead.guard.id);
  ASSERT_NE(segment, nullptr);
  EXPECT_EQ(segment->size_bytes, 64u * 1024);
  EXPECT_EQ(segment->creator_pid, dead.creator.pid());
  EXPECT_EQ(segment->last_pid, dead.creator.pid());
  EXPECT_EQ(segment->attached, 0u);
  EXPECT_EQ(segment->mode & 0777, 0600u);
}

TEST(IpcSysvShm, SegmentAttachedByLiveProcessIsNotReported) {
  const DeadSegment dead;
  ASSERT_GE(dead.guard.id, 0);
  {
    const Child holder(Child::Stays, [&] { return attach(dead.guard.id); });
    ASSERT_EQ(holder.value(), 0);
    EXPECT_EQ(Scan().shm(dead.guard.id), nullptr);
  }
  EXPECT_NE(Scan().shm(dead.guard.id), nullptr);  // once the holder is gone too
}

TEST(IpcSysvShm, SegmentOfLiveCreatorIsNotReported) {
  const ShmGuard guard{::shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600)};  // we are its creator
  ASSERT_GE(guard.id, 0);
  EXPECT_EQ(Scan().shm(guard.id), nullptr);
}

TEST(IpcSysvSem, SetLastOperatedOnByDeadProcessIsReported) {
  const DeadSemSet dead(/*operate=*/true);
  ASSERT_GE(dead.guard.id, 0);
  const Scan scan;
  const SysvSemLeftover* set = scan.sem(dead.guard.id);
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->nsems, 2u);
  EXPECT_EQ(set->last_pids, (std::vector<int>{dead.creator.pid(), dead.creator.pid()}));
  EXPECT_GT(set->otime, 0);
}

TEST(IpcSysvSem, SetNeverOperatedOnIsNotReported) {
  const DeadSemSet dead(/*operate=*/false);  // its creator may have handed it on
  ASSERT_GE(dead.guard.id, 0);
  EXPECT_EQ(Scan().sem(dead.guard.id), nullptr);
}

// ---------------------------------------------------------------- POSIX

TEST(IpcPosix, FileOfDeadCreatorIsReported) {
  REQUIRE_PRIVATE_DEV_SHM();
  const DeadShmFile dead;
  ASSERT_EQ(dead.creator.value(), 0);
  const Scan scan;
  const PosixShmLeftover* file = scan.posix(dead.name);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->path, dead.guard.path);
  EXPECT_EQ(file->size_bytes, 8192u);
  EXPECT_GE(file->allocated_bytes, 4096u);  // the written page holds memory
  EXPECT_FALSE(file->semaphore);
  EXPECT_FALSE(file->creator_pid.has_value());
  // Processes we cannot read (a sandbox may hide some even from root) are counted and said.
  EXPECT_EQ(scan.found.processes_not_inspected != 0, !scan.found.errors.empty());
}

TEST(IpcPosix, FileHeldOpenByLiveProcessIsNotReported) {
  REQUIRE_PRIVATE_DEV_SHM();
  const ShmFile shm;
  {
    const Child holder(Child::Stays, [&] { return make_shm_file(shm.name, Hold::OpenFd); });
    ASSERT_EQ(holder.value(), 0);
    EXPECT_EQ(Scan().posix(shm.name), nullptr);
  }
  EXPECT_NE(Scan().posix(shm.name), nullptr);
}

TEST(IpcPosix, FileMappedByLiveProcessIsNotReported) {
  REQUIRE_PRIVATE_DEV_SHM();
  const ShmFile shm;
  const Child holder(Child::Stays, [&] { return make_shm_file(shm.name, Hold::Mapping); });
  ASSERT_EQ(holder.value(), 0);  // its fd is closed: only the mapping holds the file
  EXPECT_EQ(Scan().posix(shm.name), nullptr);
}

TEST(IpcPosix, NamedSemaphoreOfDeadCreatorIsReported) {
  REQUIRE_PRIVATE_DEV_SHM();
  const std::string name = unique_name();
  const PathGuard guard{"/dev/shm/sem." + name};
  const Child creator(Child::Exits, [&] {
    sem_t* sem = ::sem_open(("/" + name).c_str(), O_CREAT | O_EXCL, 0600, 1);
    return sem != SEM_FAILED && ::sem_post(sem) == 0 && ::sem_close(sem) == 0 ? 0L : -1L;
  });
  ASSERT_EQ(creator.value(), 0);
  const Scan scan;
  ASSERT_NE(scan.posix("sem." + name), nullptr);
  EXPECT_TRUE(scan.posix("sem." + name)->semaphore);
}

// A private directory stands in for /dev/shm where the names would confuse other programs.
struct PrivateShmDir {
  PathGuard guard{[] {
    char pattern[] = "/dev/shm/gpureap-test-dir-XXXXXX";
    return std::string(::mkdtemp(pattern) != nullptr ? pattern : "");
  }()};
  IpcScanOptions options() const {
    IpcScanOptions options;
    options.shm_dir = guard.path;
    return options;
  }
  std::string path(const std::string& name) const { return guard.path + "/" + name; }
};

TEST(IpcPosix, TorchNamesWithLiveCreatorAreNotReported) {
  REQUIRE_PRIVATE_DEV_SHM();
  const PrivateShmDir dir;
  ASSERT_FALSE(dir.guard.path.empty());
  const Child dead(Child::Exits, [] { return 0L; });
  const std::string live_name = fmt::format("torch_{}_3809153727_0", ::getpid());
  const std::string dead_name = fmt::format("torch_{}_12345_1", dead.pid());
  ASSERT_TRUE(write_file(dir.path(live_name)) && write_file(dir.path(dead_name)));
  const Scan scan(dir.options());
  EXPECT_EQ(scan.posix(live_name), nullptr);
  ASSERT_NE(scan.posix(dead_name), nullptr);
  EXPECT_EQ(scan.posix(dead_name)->creator_pid, dead.pid());
}

TEST(IpcPosix, OnlyRegularFilesOlderThanMinAgeAreReported) {
  REQUIRE_PRIVATE_DEV_SHM();
  const PrivateShmDir dir;
  ASSERT_FALSE(dir.guard.path.empty());
  ASSERT_TRUE(write_file(dir.path("plain")));
  ASSERT_EQ(::symlink("plain", dir.path("link").c_str()), 0);
  ASSERT_EQ(::mkdir(dir.path("subdir").c_str(), 0700), 0);
  ASSERT_TRUE(write_file(dir.path("subdir/inner")));
  ASSERT_EQ(::mkfifo(dir.path("fifo").c_str(), 0600), 0);
  const Scan scan(dir.options());
  ASSERT_EQ(scan.found.posix.size(), 1u);
  EXPECT_EQ(scan.found.posix[0].name, "plain");
  IpcScanOptions patient = dir.options();
  patient.min_age_seconds = 3600;
  EXPECT_TRUE(Scan(patient).found.posix.empty());
}

// ---------------------------------------------------------------- removal

TEST(IpcRemoval, SysvShmIsRemovedOnceThenGone) {
  const DeadSegment dead;
  const Scan scan;
  ASSERT_NE(scan.shm(dead.guard.id), nullptr);
  const RemovalResult result = remove_sysv_shm(*scan.shm(dead.guard.id));
  EXPECT_EQ(result.outcome, RemovalOutcome::Removed) << result.message;
  struct shmid_ds ds {};
  EXPECT_NE(::shmctl(dead.guard.id, IPC_STAT, &ds), 0);
  EXPECT_EQ(remove_sysv_shm(*scan.shm(dead.guard.id)).outcome, RemovalOutcome::Gone);
}

TEST(IpcRemoval, SysvShmAttachedOrChangedSinceIsKept) {
  const DeadSegment dead;
  const Scan scan;
  ASSERT_NE(scan.shm(dead.guard.id), nullptr);
  {
    const Child holder(Child::Stays, [&] { return attach(dead.guard.id); });
    ASSERT_EQ(holder.value(), 0);
    EXPECT_EQ(remove_sysv_shm(*scan.shm(dead.guard.id)).outcome, RemovalOutcome::InUse);
  }
  struct shmid_ds ds {};
  ASSERT_EQ(::shmctl(dead.guard.id, IPC_STAT, &ds), 0);
  ds.shm_perm.mode = 0640;
  ASSERT_EQ(::shmctl(dead.guard.id, IPC_SET, &ds), 0);
  EXPECT_EQ(remove_sysv_shm(*scan.shm(dead.guard.id)).outcome, RemovalOutcome::Changed);
  EXPECT_EQ(::shmctl(dead.guard.id, IPC_STAT, &ds), 0);  // still there
}

TEST(IpcRemoval, SysvSemIsRemovedOnceThenGone) {
  const DeadSemSet dead(/*operate=*/true);
  const Scan scan;
  ASSERT_NE(scan.sem(dead.guard.id), nullptr);
  const RemovalResult result = remove_sysv_sem(*scan.sem(dead.guard.id));
  EXPECT_EQ(result.outcome, RemovalOutcome::Removed) << result.message;
  EXPECT_NE(read_sem_set_state(dead.guard.id).error, 0);
  EXPECT_EQ(remove_sysv_sem(*scan.sem(dead.guard.id)).outcome, RemovalOutcome::Gone);
}

TEST(IpcRemoval, SysvSemOperatedOnOrChangedSinceIsKept) {
  const DeadSemSet dead(/*operate=*/true);
  const Scan scan;
  ASSERT_NE(scan.sem(dead.guard.id), nullptr);
  {
    const Child user(Child::Stays, [&] {
      struct sembuf op = {0, -1, 0};
      return ::semop(dead.guard.id, &op, 1) == 0 ? 0L : -1L;
    });
    ASSERT_EQ(user.value(), 0);
    EXPECT_EQ(remove_sysv_sem(*scan.sem(dead.guard.id)).outcome, RemovalOutcome::InUse);
  }
  struct semid_ds ds {};
  SemArg arg{};
  arg.buf = &ds;
  ASSERT_EQ(::semctl(dead.guard.id, 0, IPC_STAT, arg), 0);
  ds.sem_perm.mode = 0640;
  ASSERT_EQ(::semctl(dead.guard.id, 0, IPC_SET, arg), 0);
  SysvSemLeftover parsed = *scan.sem(dead.guard.id);
  parsed.last_pids.clear();  // as from a parsed table: the PIDs alone decide
  EXPECT_EQ(remove_sysv_sem(parsed).outcome, RemovalOutcome::Changed);
  EXPECT_EQ(read_sem_set_state(dead.guard.id).error, 0);
}

TEST(IpcRemoval, PosixFileIsRemovedOnceThenGone) {
  REQUIRE_PRIVATE_DEV_SHM();
  const DeadShmFile dead;
  // Removal rightly refuses while any process on the host is in D. Besides the tests that freeze
  // processes on purpose (they hold the host_d_state lock), other tests' processes pass through D
  // for moments (disk writes under load), so the test waits for a moment without one: only a D
  // that lasts 3 s skips it.
  std::string blocked;
  for (int attempt = 0; attempt < 30; ++attempt, ::usleep(100000)) {
    const Scan scan;
    ASSERT_NE(scan.posix(dead.name), nullptr);
    if (!scan.found.blocked_pids.empty()) {
      blocked = "PID " + std::to_string(scan.found.blocked_pids.front()) + " is in D";
      continue;
    }
    IpcScanOptions options;
    if (scan.found.processes_not_inspected != 0) {  // a process we cannot read may hold it
      EXPECT_EQ(remove_posix_shm(*scan.posix(dead.name), options).outcome,
                RemovalOutcome::PermissionDenied);
      EXPECT_TRUE(exists(dead.guard.path));
      options.accept_uninspected_processes = true;
    }
    const RemovalResult result = remove_posix_shm(*scan.posix(dead.name), options);
    if (result.outcome == RemovalOutcome::InUse && result.message.find("(D)") != std::string::npos) {
      blocked = result.message;  // a process entered D between the scan and the removal
      continue;
    }
    EXPECT_EQ(result.outcome, RemovalOutcome::Removed) << result.message;
    EXPECT_FALSE(exists(dead.guard.path));
    EXPECT_EQ(remove_posix_shm(*scan.posix(dead.name), options).outcome, RemovalOutcome::Gone);
    return;
  }
  GTEST_SKIP() << blocked << " for 3 s (another test may have frozen it): nothing is removed while one is";
}

TEST(IpcRemoval, PosixFileOpenedOrReplacedSinceIsKept) {
  REQUIRE_PRIVATE_DEV_SHM();
  const DeadShmFile dead;
  const PathGuard spare{dead.guard.path + "-spare"};
  const Scan scan;
  ASSERT_NE(scan.posix(dead.name), nullptr);
  {
    const Child opener(Child::Stays, [&] { return ::open(dead.guard.path.c_str(), O_RDONLY) < 0 ? -1L : 0L; });
    ASSERT_EQ(opener.value(), 0);
    EXPECT_EQ(remove_posix_shm(*scan.posix(dead.name), {}).outcome, RemovalOutcome::InUse);
  }
  ASSERT_TRUE(write_file(spare.path));
  ASSERT_EQ(::rename(spare.path.c_str(), dead.guard.path.c_str()), 0);  // same name, new inode
  EXPECT_EQ(remove_posix_shm(*scan.posix(dead.name), {}).outcome, RemovalOutcome::Changed);
  EXPECT_TRUE(exists(dead.guard.path));
}

// A process with a thread in D is never read (its maps could hang us), so it might map the
// file: nothing is removed while one exists, and the refusal names it. The cgroup v1 freezer
// parks a child in D.
TEST(IpcRemoval, PosixFileIsKeptWhileAProcessIsInD) {
  REQUIRE_PRIVATE_DEV_SHM();
  const std::string freezer = "/sys/fs/cgroup/freezer";
  struct stat info {};
  if (::stat((freezer + "/cgroup.procs").c_str(), &info) != 0) {
    GTEST_SKIP() << "no cgroup v1 freezer at " << freezer
                 << " (cgroup v2's freezer stops tasks in an interruptible sleep, not D)";
  }
  const DeadShmFile dead;
  const Scan scan;
  ASSERT_NE(scan.posix(dead.name), nullptr);
  // Torn down in reverse: thawed, then the child killed and reaped, then the group removed.
  struct GroupDir {
    std::string path;
    ~GroupDir() { ::rmdir(path.c_str()); }
  } group{freezer + "/gpureap-ipc-test-" + std::to_string(::getpid())};
  ASSERT_EQ(::mkdir(group.path.c_str(), 0755), 0);
  const Child sleeper(Child::Stays, [] { return 0L; });
  struct Thaw {
    std::string group;
    ~Thaw() { std::ofstream(group + "/freezer.state") << "THAWED"; }
  } thaw{group.path};
  std::ofstream(group.path + "/cgroup.procs") << sleeper.pid();
  std::ofstream(group.path + "/freezer.state") << "FROZEN";
  char state = '?';
  for (int i = 0; i < 200 && state != 'D'; ++i) {
    std::ifstream stat("/proc/" + std::to_string(sleeper.pid()) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    state = close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
    if (state != 'D') ::usleep(10000);
  }
  ASSERT_EQ(state, 'D');
  const RemovalResult result = remove_posix_shm(*scan.posix(dead.name), {});
  EXPECT_EQ(result.outcome, RemovalOutcome::InUse) << result.message;
  EXPECT_NE(result.message.find("uninterruptible sleep (D)"), std::string::npos) << result.message;
  EXPECT_TRUE(exists(dead.guard.path));
}

TEST(IpcRemoval, PosixRefusesPathsAndSymlinks) {
  REQUIRE_PRIVATE_DEV_SHM();
  const PrivateShmDir dir;
  ASSERT_FALSE(dir.guard.path.empty());
  ASSERT_EQ(::mkdir(dir.path("sub").c_str(), 0700), 0);
  ASSERT_TRUE(write_file(dir.path("sub/inner")) && write_file(dir.path("victim")));
  const Scan scan(dir.options());
  ASSERT_NE(scan.posix("victim"), nullptr);
  IpcScanOptions options = dir.options();
  options.accept_uninspected_processes = true;  // only the refusals are under test here
  PosixShmLeftover with_path = *scan.posix("victim");
  for (const char* name : {"sub/inner", "..", ".", "", "../sub"}) {
    with_path.name = name;
    EXPECT_EQ(remove_posix_shm(with_path, options).outcome, RemovalOutcome::Failed) << name;
  }
  EXPECT_TRUE(exists(dir.path("sub/inner")));
  // The found file swapped for a symlink to another file: neither is touched.
  ASSERT_EQ(::rename(dir.path("victim").c_str(), dir.path("sub/moved").c_str()), 0);
  ASSERT_EQ(::symlink("sub/inner", dir.path("victim").c_str()), 0);
  EXPECT_EQ(remove_posix_shm(*scan.posix("victim"), options).outcome, RemovalOutcome::Changed);
  EXPECT_TRUE(exists(dir.path("victim")) && exists(dir.path("sub/inner")));
  // A shm directory given as a symlink is not followed either.
  ASSERT_EQ(::rename(dir.path("sub/moved").c_str(), dir.path("victim").c_str()), 0);
  const PathGuard link{dir.guard.path + "-link"};
  ASSERT_EQ(::symlink(dir.guard.path.c_str(), link.path.c_str()), 0);
  options.shm_dir = link.path;
  EXPECT_EQ(remove_posix_shm(*scan.posix("victim"), options).outcome, RemovalOutcome::Failed);
  EXPECT_FALSE(Scan(options).found.errors.empty());
  EXPECT_TRUE(exists(dir.path("victim")));
}

TEST(IpcRemoval, OutcomeNames) {
  std::string names;
  for (int i = 0; i <= static_cast<int>(RemovalOutcome::Failed); ++i) {
    names += fmt::format("{} ", removal_outcome_name(static_cast<RemovalOutcome>(i)));
  }
  EXPECT_EQ(names, "removed gone changed in-use permission-denied failed ");
}

}  // namespace
}  // namespace gpureap
