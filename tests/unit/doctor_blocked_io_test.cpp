// The D-state report: mount matching on mountinfo text, a fixture /proc tree of a process
// stuck on NFS, and real processes: one sleeping with its cwd and files on a tmpfs, one held
// in uninterruptible sleep by the cgroup v1 freezer. Children, mounts and cgroups are
// removed by guards, also when an assertion fails.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor/blocked_io.hpp"
#include "kill_test_support.hpp"

namespace gpureap {
namespace {

namespace fs = std::filesystem;
using killtest::pause_forever;
using killtest::ready;
using killtest::spawn;
using killtest::wait_for_state;

const std::string kFixture = std::string(GPUREAP_FIXTURE_DIR) + "/blocked-io/proc";

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

const BlockedFile* find_file(const BlockedIoDetails& details, const std::string& what) {
  for (const BlockedFile& file : details.files) {
    if (file.what == what) return &file;
  }
  return nullptr;
}

std::string make_temp_dir(const std::string& prefix) {
  std::string pattern = prefix + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  return fs::canonical(pattern).string();  // links read back resolved paths
}

TEST(BlockedIoMounts, LongestWholeComponentPrefixWinsWithTypeSourceAndNetworkFlag) {
  const std::string text = read_text(kFixture + "/4242/mountinfo");
  ASSERT_FALSE(text.empty());
  auto point = [&](std::string_view path) {
    const auto mount = mount_for_path(text, path);
    return mount ? mount->mount_point : std::string("<none>");
  };
  EXPECT_EQ(point("/mnt/data"), "/mnt/data");
  EXPECT_EQ(point("/mnt/data/ckpt/model.pt"), "/mnt/data");
  EXPECT_EQ(point("/mnt/data/scratch/x"), "/mnt/data/scratch");  // nested mount
  EXPECT_EQ(point("/mnt/datascratch"), "/");                       // not a component prefix
  EXPECT_EQ(point("/mnt/database/t.db"), "/mnt/database");
  EXPECT_EQ(point("/usr/lib/libcuda.so"), "/");                    // root fallback
  EXPECT_EQ(point("/dev/nvidia0"), "/dev");
  EXPECT_EQ(point("/"), "/");

  const auto mount = mount_for_path(text, "/mnt/data/a/b");
  ASSERT_TRUE(mount.has_value());
  EXPECT_EQ(mount->fs_type, "nfs4");
  EXPECT_EQ(mount->source, "fileserver:/export/data");
  EXPECT_TRUE(mount->network);
  const auto local = mount_for_path(text, "/mnt/data/scratch/f");
  ASSERT_TRUE(local.has_value());
  EXPECT_EQ(local->fs_type, "tmpfs");
  EXPECT_FALSE(local->network);
}

TEST(BlockedIoMounts, EscapesAreDecodedDeletedSuffixIgnoredAndOvermountOnTopWins) {
  const std::string text = read_text(kFixture + "/4242/mountinfo");
  const auto share = mount_for_path(text, "/mnt/team share/notes.txt");
  ASSERT_TRUE(share.has_value());
  EXPECT_EQ(share->mount_point, "/mnt/team share");
  EXPECT_EQ(share->source, "//nas/team share");
  EXPECT_EQ(share->fs_type, "cifs");
  const auto deleted = mount_for_path(text, "/mnt/data/ckpt/model.pt (deleted)");
  ASSERT_TRUE(deleted.has_value());
  EXPECT_EQ(deleted->mount_point, "/mnt/data");
  // autofs at /home with NFS mounted over it: the later line is what the process sees.
  const auto home = mount_for_path(text, "/home/alice/.cache/torch");
  ASSERT_TRUE(home.has_value());
  EXPECT_EQ(home->fs_type, "nfs");
  EXPECT_EQ(home->source, "homeserver:/home");
}

// Found by fuzz/mountinfo_fuzz: '\f', '\v' and '\r' (which the kernel does not escape) split
// a mount point into two fields, so files under "/mnt/a\fb" were put on the root mount.
TEST(BlockedIoMounts, OnlySpacesSeparateFields) {
  const std::string text =
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
      "36 22 0:45 / /mnt/a\fb\vc\rd rw,relatime shared:2 - nfs4 server:/export rw\n";
  const auto mount = mount_for_path(text, "/mnt/a\fb\vc\rd/ckpt.pt");
  ASSERT_TRUE(mount.has_value());
  EXPECT_EQ(mount->mount_point, "/mnt/a\fb\vc\rd");
  EXPECT_EQ(mount->fs_type, "nfs4");
  EXPECT_TRUE(mount->network);
}

TEST(BlockedIoMounts, NonPathsAndGarbageMatchNothing) {
  const std::string text = read_text(kFixture + "/4242/mountinfo");
  EXPECT_FALSE(mount_for_path(text, "socket:[12345]").has_value());
  EXPECT_FALSE(mount_for_path(text, "anon_inode:[eventfd]").has_value());
  EXPECT_FALSE(mount_for_path(text, "").has_value());
  EXPECT_FALSE(mount_for_path("", "/mnt/data/x").has_value());
  EXPECT_FALSE(mount_for_path("garbage without separator\n1 2 3\n", "/x").has_value());
  // A line cut before its separator is skipped; the good line after it still counts.
  const std::string cut = "40 1 0:50 / /mnt/cut rw\n26 1 254:1 / / rw - ext4 /dev/vda1 rw\n";
  EXPECT_EQ(mount_for_path(cut, "/mnt/cut/x").value_or(MountRef{}).mount_point, "/");
}

TEST(BlockedIoNetworkFs, KnownNetworkAndLocalTypes) {
  for (const char* type : {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs",
                           "fuse.glusterfs", "lustre", "gpfs", "9p", "fuse.sshfs", "afs",
                           "beegfs", "fuse.s3fs", "fuse.juicefs", "fuse.ceph-fuse", "wekafs"}) {
    EXPECT_TRUE(is_network_filesystem(type)) << type;
  }
  for (const char* type : {"ext4", "xfs", "btrfs", "tmpfs", "overlay", "proc", "devtmpfs",
                           "nfsd", "fuse", "fuse.portal", "NFS", "nfs4 ", "", "autofs"}) {
    EXPECT_FALSE(is_network_filesystem(type)) << type;
  }
}

TEST(BlockedIoSchedstats, BlockedTimeNeedsBlockStartAndTheRunqueueClock) {
  const std::string debug = "cpu#0\n  .clock                         : 2000.500000\n"
                            "  .clock_task                    : 9000.000000\n"
                            "cpu#1\n  .clock                         : 1999.000000\n";
  const std::string modern = "block_start                                  :       500.500000\n";
  const std::string old = "se.statistics.block_start                    :       500.500000\n";
  // 2000.5 ms on the CPU with the latest clock, 500.5 ms at the block: 1.5 s (exact in binary)
  EXPECT_EQ(blocked_seconds_from(modern, debug), std::optional<double>(1.5));
  EXPECT_EQ(blocked_seconds_from(old, debug), std::optional<double>(1.5));
  EXPECT_FALSE(blocked_seconds_from("block_start : 0.000000\n", debug));  // not set
  EXPECT_FALSE(blocked_seconds_from("se.exec_start : 12.000000\n", debug));  // schedstats off
  EXPECT_FALSE(blocked_seconds_from(modern, ""));  // no clock to compare with
}

// Copies the fixture and adds the links git does not hold well: fd/*, cwd, root, exe.
class FixtureProc {
 public:
  FixtureProc() : dir_(make_temp_dir(::testing::TempDir() + "gpureap-blocked-io-")) {
    fs::copy(kFixture, dir_ + "/proc", fs::copy_options::recursive);
    const std::string pid = dir_ + "/proc/4242";
    fs::create_directory(pid + "/fd");
    const std::vector<std::pair<std::string, std::string>> links = {
        {"fd/0", "/dev/pts/0"}, {"fd/1", "pipe:[77001]"}, {"fd/3", "/dev/nvidiactl"},
        {"fd/4", "/dev/nvidia0"}, {"fd/7", "/mnt/data/ckpt/model.pt (deleted)"},
        {"fd/8", "/mnt/data/scratch/shard-0001.bin"}, {"fd/9", "socket:[88123]"},
        {"fd/10", "/home/alice/.cache/torch/kernels.bin"}, {"fd/11", "/mnt/team share/notes.txt"},
        {"fd/12", "/mnt/data/ckpt/optimizer.pt"}, {"cwd", "/mnt/data/run1"}, {"root", "/"},
        {"exe", "/usr/bin/python3.11"}};
    for (const auto& [name, target] : links) fs::create_symlink(target, pid + "/" + name);
  }
  ~FixtureProc() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string root() const { return dir_ + "/proc"; }

 private:
  std::string dir_;
};

TEST(BlockedIoFixture, ProcessStuckOnNfsIsReportedWithItsMountsAndWaits) {
  const FixtureProc proc;
  const BlockedIoDetails details = inspect_blocked_process(proc.root(), 4242);
  EXPECT_FALSE(details.error.has_value()) << *details.error;
  EXPECT_EQ(details.state, 'D');
  EXPECT_EQ(details.start_time_ticks, 1107000u);
  EXPECT_EQ(details.wchan, "rpc_wait_bit_killable");
  EXPECT_EQ(details.context_switches, std::optional<std::uint64_t>(1542));
  ASSERT_TRUE(details.blocked_since_seconds.has_value());
  EXPECT_NEAR(*details.blocked_since_seconds, 123.456, 1e-9);  // 5123456.25 - 5000000.25 ms

  // Every file with the mount it sits on: cwd, exe (root "/" is left out), then the fds whose
  // targets are paths (pipes and sockets are not).
  std::vector<std::string> files;
  for (const BlockedFile& f : details.files) {
    files.push_back(f.what + " " + f.path + " -> " +
                    (f.mount ? f.mount->fs_type + " " + f.mount->mount_point : "?"));
  }
  EXPECT_EQ(files, (std::vector<std::string>{
                       "cwd /mnt/data/run1 -> nfs4 /mnt/data",
                       "exe /usr/bin/python3.11 -> ext4 /",
                       "fd 0 /dev/pts/0 -> devtmpfs /dev",
                       "fd 3 /dev/nvidiactl -> devtmpfs /dev",
                       "fd 4 /dev/nvidia0 -> devtmpfs /dev",
                       "fd 7 /mnt/data/ckpt/model.pt (deleted) -> nfs4 /mnt/data",
                       "fd 8 /mnt/data/scratch/shard-0001.bin -> tmpfs /mnt/data/scratch",
                       "fd 10 /home/alice/.cache/torch/kernels.bin -> nfs /home",
                       "fd 11 /mnt/team share/notes.txt -> cifs /mnt/team share",
                       "fd 12 /mnt/data/ckpt/optimizer.pt -> nfs4 /mnt/data"}));
  EXPECT_EQ(details.files_omitted, 0u);

  // Each network mount once, in the order its first file appeared.
  std::vector<std::string> network;
  for (const MountRef& mount : details.network_mounts) {
    network.push_back(mount.fs_type + " " + mount.source + " on " + mount.mount_point);
  }
  EXPECT_EQ(network, (std::vector<std::string>{"nfs4 fileserver:/export/data on /mnt/data",
                                               "nfs homeserver:/home on /home",
                                               "cifs //nas/team share on /mnt/team share"}));
  std::vector<std::string> threads;  // 4243 sleeps interruptibly: not listed
  for (const auto& t : details.blocked_threads) {
    threads.push_back(std::to_string(t.tid) + " " + t.wchan);
  }
  EXPECT_EQ(threads, (std::vector<std::string>{"4242 rpc_wait_bit_killable",
                                               "4244 folio_wait_bit_common"}));
  ASSERT_TRUE(details.kernel_stack.has_value());
  EXPECT_EQ(details.kernel_stack->rfind("[<0>] rpc_wait_bit_killable+0x1e/0xa0 [sunrpc]\n", 0), 0u);
  EXPECT_NE(details.kernel_stack->find("line-16-is-the-last-shown"), std::string::npos);
  EXPECT_EQ(details.kernel_stack->find("line-17-is-cut"), std::string::npos);
}

TEST(BlockedIoFixture, HiddenWchanMissingFilesAndAbsentProcessAreSaidPlainly) {
  const FixtureProc proc;
  const std::string pid = proc.root() + "/4242";
  std::ofstream(pid + "/wchan") << "0";
  fs::remove(pid + "/mountinfo");
  fs::remove(pid + "/sched");
  const BlockedIoDetails details = inspect_blocked_process(proc.root(), 4242);
  EXPECT_EQ(details.wchan, "");
  EXPECT_FALSE(details.blocked_since_seconds.has_value());
  EXPECT_TRUE(details.network_mounts.empty());
  ASSERT_FALSE(details.files.empty());
  EXPECT_FALSE(details.files[0].mount.has_value());
  ASSERT_TRUE(details.error.has_value());
  EXPECT_EQ(*details.error,
            "cannot read the mount table of PID 4242 (No such file or directory): its files are "
            "shown without their mounts");

  const BlockedIoDetails gone = inspect_blocked_process(proc.root(), 999999);
  EXPECT_EQ(gone.error, std::optional<std::string>("PID 999999 is gone"));
  EXPECT_FALSE(sample_blocked(proc.root(), 999999).has_value());
}

TEST(BlockedIoSample, StayedBlockedOnlyForTheSameProcessStillInDWithoutRunning) {
  const BlockedSample first{42, 1000, 'D', 17, 10.0};
  EXPECT_TRUE(stayed_blocked(first, BlockedSample{42, 1000, 'D', 17, 10.2}));
  EXPECT_FALSE(stayed_blocked(first, BlockedSample{42, 1000, 'D', 18, 10.2}));  // it ran
  EXPECT_FALSE(stayed_blocked(first, BlockedSample{42, 1001, 'D', 17, 10.2}));  // PID reused
  EXPECT_FALSE(stayed_blocked(first, BlockedSample{43, 1000, 'D', 17, 10.2}));
  EXPECT_FALSE(stayed_blocked(first, BlockedSample{42, 1000, 'S', 17, 10.2}));
  EXPECT_FALSE(stayed_blocked(first, BlockedSample{42, 1000, 'D', std::nullopt, 10.2}));
  EXPECT_FALSE(stayed_blocked(first, BlockedSample{42, 1000, 'D', 17, 9.0}));  // out of order
}

// A directory on a tmpfs: a private tmpfs mounted on a fresh directory whose name holds a
// space (so mountinfo escapes it) when root, else a directory in /dev/shm. Unmounted and
// removed on destruction.
class TmpfsDir {
 public:
  TmpfsDir() {
    if (::geteuid() == 0) {
      base_ = make_temp_dir("/tmp/gpureap blocked-io ");
      if (::mount("gpureap-test", base_.c_str(), "tmpfs", 0, "size=1m") == 0) {
        mounted_ = true;
        path_ = mount_point_ = base_;
        return;
      }
    }
    const auto shm = mount_for_path(read_text("/proc/self/mountinfo"), "/dev/shm/x");
    if (!shm || shm->fs_type != "tmpfs") return;
    mount_point_ = shm->mount_point;
    path_ = make_temp_dir("/dev/shm/gpureap-blocked-io-");
  }
  ~TmpfsDir() {
    if (mounted_) ::umount2(base_.c_str(), MNT_DETACH);
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
    if (!base_.empty()) fs::remove_all(base_, ignored);
  }
  const std::string& path() const { return path_; }
  const std::string& mount_point() const { return mount_point_; }

 private:
  std::string base_, path_, mount_point_;
  bool mounted_ = false;
};

// A child killed and reaped on destruction. When it sits in a frozen cgroup v1 group, the
// group is thawed first (a frozen child cannot die) and removed afterwards.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  ~Child() {
    if (!freezer_group_.empty()) set_freezer("THAWED");
    killtest::reap(pid_);
    const char* group = freezer_group_.c_str();
    for (int i = 0; !freezer_group_.empty() && i < 100 && ::rmdir(group) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  void adopt_freezer_group(const std::string& group) { freezer_group_ = group; }
  bool set_freezer(const char* state) const {
    std::ofstream file(freezer_group_ + "/freezer.state");
    file << state << std::flush;
    return static_cast<bool>(file);
  }

 private:
  pid_t pid_;
  std::string freezer_group_;
};

TEST(BlockedIoLive, SleepingChildShowsCwdAndOpenFilesOnItsTmpfs) {
  const TmpfsDir tmpfs;
  if (tmpfs.path().empty()) GTEST_SKIP() << "no tmpfs: not root, and /dev/shm is not a tmpfs";
  const std::string dir = tmpfs.path();
  const Child child(spawn([&dir](int fd) {
    if (::chdir(dir.c_str()) != 0) ::_exit(2);
    const int held = ::open("held.txt", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    const int gone = ::open("gone.txt", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (held < 0 || gone < 0 || ::dup2(held, 42) != 42 || ::dup2(gone, 43) != 43) ::_exit(3);
    ::unlink("gone.txt");
    ready(fd);
    pause_forever();
  }));
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(wait_for_state(child.pid(), 'S'));
  const BlockedIoDetails details = inspect_blocked_process("/proc", child.pid());
  EXPECT_FALSE(details.error.has_value()) << *details.error;
  EXPECT_EQ(details.state, 'S');
  EXPECT_TRUE(details.context_switches.has_value());
  for (const auto& [what, path] : {std::pair<std::string, std::string>{"cwd", dir},
                                   {"fd 42", dir + "/held.txt"},
                                   {"fd 43", dir + "/gone.txt (deleted)"}}) {
    const BlockedFile* file = find_file(details, what);
    ASSERT_NE(file, nullptr) << what;
    EXPECT_EQ(file->path, path);
    ASSERT_TRUE(file->mount.has_value()) << what;
    EXPECT_EQ(file->mount->mount_point, tmpfs.mount_point()) << what;
    EXPECT_EQ(file->mount->fs_type, "tmpfs") << what;
    EXPECT_FALSE(file->mount->network);
  }
  EXPECT_TRUE(details.network_mounts.empty());
  EXPECT_TRUE(details.blocked_threads.empty());
}

// A real D state: the cgroup v1 freezer parks tasks in __refrigerator, uninterruptibly.
TEST(BlockedIoLive, FrozenChildIsInDWithWchanAndStaysBlockedUntilThawed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a cgroup v1 freezer group";
  const std::string freezer = "/sys/fs/cgroup/freezer";
  if (::access((freezer + "/cgroup.procs").c_str(), F_OK) != 0) {
    GTEST_SKIP() << "no cgroup v1 freezer at " << freezer
                 << " (the cgroup v2 freezer stops tasks in an interruptible sleep, not D)";
  }
  const std::string group = freezer + "/gpureap-test-blocked-io-" + std::to_string(::getpid());
  if (::mkdir(group.c_str(), 0755) != 0 && errno != EEXIST) {
    GTEST_SKIP() << "cannot create " << group << ": " << std::strerror(errno);
  }
  Child child(spawn([](int fd) {
    ready(fd);
    pause_forever();
  }));
  child.adopt_freezer_group(group);  // from here on the guard thaws and removes the group
  ASSERT_GT(child.pid(), 0);
  std::ofstream(group + "/cgroup.procs") << child.pid() << std::flush;
  ASSERT_TRUE(child.set_freezer("FROZEN"));
  ASSERT_TRUE(wait_for_state(child.pid(), 'D'));

  const auto first = sample_blocked("/proc", child.pid());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto second = sample_blocked("/proc", child.pid());
  ASSERT_TRUE(first && second);
  EXPECT_TRUE(stayed_blocked(*first, *second));
  EXPECT_GE(second->taken_at_monotonic - first->taken_at_monotonic, 0.2);

  const BlockedIoDetails details = inspect_blocked_process("/proc", child.pid());
  EXPECT_FALSE(details.error.has_value()) << *details.error;
  EXPECT_EQ(details.state, 'D');
  EXPECT_FALSE(details.wchan.empty());
  ASSERT_EQ(details.blocked_threads.size(), 1u);
  EXPECT_EQ(details.blocked_threads[0].tid, child.pid());
  EXPECT_EQ(details.blocked_threads[0].wchan, details.wchan);
  ASSERT_TRUE(details.kernel_stack.has_value()) << "root reads /proc/<pid>/stack";
  EXPECT_NE(details.kernel_stack->find(details.wchan), std::string::npos) << *details.kernel_stack;
  EXPECT_NE(find_file(details, "cwd"), nullptr);
  if (details.blocked_since_seconds) {  // only where the kernel keeps schedstats
    EXPECT_GE(*details.blocked_since_seconds, 0.2);
    EXPECT_LT(*details.blocked_since_seconds, 60.0);
  }

  ASSERT_TRUE(child.set_freezer("THAWED"));
  ASSERT_TRUE(wait_for_state(child.pid(), 'S'));
  const auto thawed = sample_blocked("/proc", child.pid());
  ASSERT_TRUE(thawed.has_value());
  EXPECT_FALSE(stayed_blocked(*first, *thawed));

  // Frozen again: D once more, but it ran in between, which the switch count shows.
  ASSERT_TRUE(child.set_freezer("FROZEN"));
  ASSERT_TRUE(wait_for_state(child.pid(), 'D'));
  const auto refrozen = sample_blocked("/proc", child.pid());
  ASSERT_TRUE(refrozen.has_value());
  EXPECT_FALSE(stayed_blocked(*first, *refrozen));
}

}  // namespace
}  // namespace gpureap
