// The simulated DRM driver (sim/drm/) with real processes: a client's fdinfo appears for every
// process holding its open file description and goes when they die, VRAM leaves
// mem_info_vram_used after the release delay, a KFD process lives as long as its /dev/kfd open
// file, under the host PID, and only for a process seen holding /dev/kfd; a bare open or a
// same-named node on another mount gets no fdinfo; and each driver's format.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/file_io.hpp"
#include "drm/drm_state.hpp"
#include "drm/fdinfo_text.hpp"
#include "harness.hpp"

namespace gpusim::test {
namespace {

using namespace std::chrono_literals;

class DrmDriver : public ::testing::Test {
 protected:
  void TearDown() override {
    if (driver_ > 0) {
      ::kill(driver_, SIGTERM);
      ::waitpid(driver_, nullptr, 0);
    }
  }
  // gpusim drm-add --pci <pci> <args>; the driver starts with the first device.
  void add(const std::string& pci, const std::vector<std::string>& args = {}) {
    std::vector<std::string> all = {"drm-add", "--pci", pci};
    all.insert(all.end(), args.begin(), args.end());
    const auto r = ctl(dir.path(), all);
    ASSERT_EQ(r.exit_status, 0) << r.err;
    if (driver_ > 0) return;
    driver_ = ::fork();
    if (driver_ == 0) {
      ::execl(GPUSIM_CTL_BINARY, GPUSIM_CTL_BINARY, "drm-driver", "--state", dir.path().c_str(), nullptr);
      ::_exit(127);
    }
    settle();
  }
  unsigned long long cycle() const {
    const auto r = read_file(dir.path() + "/drm/cycle");
    return r.ok() ? std::stoull(r.data) : 0;
  }
  // Two full driver cycles that started after the call.
  void settle() const {
    const auto wanted = cycle() + 2;
    ASSERT_TRUE(eventually([&] { return cycle() >= wanted; }, 10s)) << "the DRM driver is not cycling";
  }
  std::string fdinfo(unsigned pid, int fd) const {
    return read_file(dir.path() + "/fdinfo/" + std::to_string(pid) + "/fdinfo/" + std::to_string(fd)).data;
  }
  bool has_fdinfo(unsigned pid) const { return std::filesystem::exists(dir.path() + "/fdinfo/" + std::to_string(pid)); }
  unsigned long long vram_used(const std::string& pci = "0000:03:00.0") const {
    return std::stoull(read_file(dir.path() + "/sys/devices/" + pci + "/mem_info_vram_used").data);
  }
  std::unique_ptr<SimProcess> client(const std::vector<std::string>& args, const std::vector<std::string>& wrapper = {}) {
    std::string err;
    auto p = SimProcess::start_drm_client(dir.path(), args, &err, wrapper);
    EXPECT_TRUE(p) << err;
    if (p) settle();
    return p;
  }
  static bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

  TempDir dir;
  pid_t driver_ = -1;
};

TEST_F(DrmDriver, ClientFdinfoIsSharedByItsForkedWorkerAndGoesWhenBothDie) {
  add("0000:03:00.0");
  EXPECT_EQ(vram_used(), 128 * MiB);
  auto p = client({"--node", "renderD128", "--vram", "2GiB", "--gtt", "8MiB", "--workers", "1"});
  ASSERT_TRUE(p);
  ASSERT_EQ(p->workers().size(), 1u);
  const unsigned worker = p->workers()[0];
  const std::string id = "drm-client-id:\t" + std::to_string(p->client_id()) + "\n";
  for (const unsigned pid : {p->pid(), worker}) {
    const std::string text = fdinfo(pid, p->fd());
    EXPECT_TRUE(contains(text, "drm-driver:\tamdgpu\n")) << text;
    EXPECT_TRUE(contains(text, "drm-pdev:\t0000:03:00.0\n")) << text;
    EXPECT_TRUE(contains(text, id)) << text;
    EXPECT_TRUE(contains(text, "drm-memory-vram:\t2097152 KiB\n")) << text;
    EXPECT_TRUE(contains(text, "drm-total-vram:\t2048 MiB\n")) << text;
    EXPECT_TRUE(contains(text, "drm-memory-gtt: \t8192 KiB\n")) << text;
    EXPECT_TRUE(contains(text, "\nino:\t")) << text;  // the real generic lines come first
    EXPECT_FALSE(contains(text, "lock:")) << text;    // the simulation's lock is not the driver's
  }
  EXPECT_EQ(vram_used(), 2 * GiB + 128 * MiB);

  p->signal_owner(SIGKILL);  // the worker keeps the client alive
  settle();
  EXPECT_FALSE(has_fdinfo(p->pid()));
  EXPECT_TRUE(contains(fdinfo(worker, p->fd()), id));
  EXPECT_EQ(vram_used(), 2 * GiB + 128 * MiB);

  p->kill_workers();
  settle();
  EXPECT_FALSE(has_fdinfo(worker));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/drm/clients/" + std::to_string(p->client_id()) + ".json"));
  EXPECT_EQ(vram_used(), 128 * MiB);
}

TEST_F(DrmDriver, VramLeavesUsedAfterTheReleaseDelay) {
  add("0000:03:00.0", {"--release-delay-ms", "600"});
  auto p = client({"--node", "renderD128", "--vram", "1GiB"});
  ASSERT_TRUE(p);
  EXPECT_EQ(vram_used(), 1 * GiB + 128 * MiB);
  const auto killed = std::chrono::steady_clock::now();
  p->signal_owner(SIGKILL);
  settle();
  EXPECT_FALSE(has_fdinfo(p->pid()));  // the client is closed at once ...
  ASSERT_TRUE(eventually([&] { return vram_used() == 128 * MiB; }, 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - killed, 550ms);  // ... its VRAM freed after the delay
}

// kfd_open() hands the KFD process's reference to the open file and kfd_release() drops it; the
// sysfs directory goes with the last reference (kfd_process.c kfd_process_wq_release()). So a
// forked worker holding the inherited /dev/kfd keeps the directory of its dead parent.
TEST_F(DrmDriver, KfdProcessLivesAsLongAsItsOpenFileOfKfd) {
  add("0000:03:00.0", {"--kfd"});
  const std::string topology = dir.path() + "/sys/class/kfd/kfd/topology/nodes/";
  const std::string gpu_id = read_file(topology + "1/gpu_id").data;
  ASSERT_FALSE(gpu_id.empty());
  EXPECT_EQ(read_file(topology + "0/gpu_id").data, "0\n");  // the CPU node
  const std::string properties = read_file(topology + "1/properties").data;
  EXPECT_TRUE(contains(properties, "\nlocation_id 768\ndomain 0\n")) << properties;  // 03:00.0
  EXPECT_TRUE(contains(properties, "\ndrm_render_minor 128\n")) << properties;

  auto p = client({"--node", "renderD128", "--vram", "1GiB", "--kfd", "--workers", "1"});
  ASSERT_TRUE(p);
  const std::string proc = dir.path() + "/sys/class/kfd/kfd/proc/";
  const std::string id = gpu_id.substr(0, gpu_id.size() - 1);
  EXPECT_EQ(read_file(proc + std::to_string(p->pid()) + "/vram_" + id).data, "1073741824\n");
  const std::string pasid = read_file(proc + std::to_string(p->pid()) + "/pasid").data;
  EXPECT_TRUE(contains(fdinfo(p->pid(), p->fd()), "pasid:\t" + pasid)) << pasid;
  EXPECT_FALSE(std::filesystem::exists(proc + std::to_string(p->workers()[0])));  // fork makes no KFD process
  EXPECT_TRUE(open_files(p->workers()[0]).count(dir.path() + "/dev/kfd") ||
              open_files(p->workers()[0]).count(std::filesystem::canonical(dir.path()).string() + "/dev/kfd"));

  // The opener killed (a zombie, then reaped): its worker still holds the open file, so the
  // KFD process and its directory stay, under the dead opener's PID.
  ::kill(static_cast<pid_t>(p->pid()), SIGKILL);
  ASSERT_TRUE(eventually([&] { return !process_running(static_cast<pid_t>(p->pid())); }));
  settle();
  EXPECT_EQ(read_file(proc + std::to_string(p->pid()) + "/vram_" + id).data, "1073741824\n");
  ASSERT_EQ(p->wait_exit(5s), 128 + SIGKILL);
  settle();
  EXPECT_TRUE(std::filesystem::exists(proc + std::to_string(p->pid())));
  EXPECT_TRUE(contains(fdinfo(p->workers()[0], p->fd()), "drm-memory-vram:\t1048576 KiB"));

  // The last descriptor closed: the directory goes.
  p->kill_workers();
  settle();
  EXPECT_FALSE(std::filesystem::exists(proc + std::to_string(p->pid())));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/drm/kfd/" + std::to_string(p->pid()) + ".json"));
}

// amdkfd names the directory by lead_thread->pid, the PID in the initial namespace, as the
// other drivers record host PIDs: a client in a child PID namespace shows under its host PID.
TEST_F(DrmDriver, AClientInAChildPidNamespaceIsRecordedUnderItsHostPid) {
  add("0000:03:00.0", {"--kfd"});
  auto p = client({"--node", "renderD128", "--vram", "1GiB", "--kfd", "--workers", "1"},
                  {"/usr/bin/unshare", "-Upf", "--map-root-user"});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nspid(), 1u);
  ASSERT_NE(p->pid(), 1u);
  const std::string status = read_file("/proc/" + std::to_string(p->pid()) + "/status").data;
  EXPECT_TRUE(contains(status, "\nNSpid:\t" + std::to_string(p->pid()) + "\t1\n")) << status;
  ASSERT_EQ(p->workers().size(), 1u);
  const std::string worker = read_file("/proc/" + std::to_string(p->workers()[0]) + "/status").data;
  EXPECT_TRUE(contains(worker, "\nNSpid:\t" + std::to_string(p->workers()[0]) + "\t2\n")) << worker;
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/sys/class/kfd/kfd/proc/" + std::to_string(p->pid()) + "/pasid"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/sys/class/kfd/kfd/proc/1"));
  EXPECT_TRUE(contains(fdinfo(p->pid(), p->fd()), "drm-memory-vram:\t1048576 KiB"));
}

// Records are claims; the driver shows a KFD process only for a process it sees holding
// dev/kfd with the record's lock, owned by the record's owner.
TEST_F(DrmDriver, KfdRecordsShowOnlyForTheirOwnersProcessesHoldingKfd) {
  add("0000:03:00.0", {"--kfd"});
  auto p = client({"--node", "renderD128", "--vram", "1GiB", "--kfd", "--workers", "1"});
  ASSERT_TRUE(p);
  const auto real = nlohmann::json::parse(read_file(dir.path() + "/drm/kfd/" + std::to_string(p->pid()) + ".json").data);
  const pid_t sleeper = ::fork();
  if (sleeper == 0) {
    ::execl("/bin/sleep", "sleep", "30", nullptr);
    ::_exit(127);
  }
  ASSERT_TRUE(eventually([&] { return read_file("/proc/" + std::to_string(sleeper) + "/comm").data == "sleep\n"; }));
  // One for a process that has no /dev/kfd open; one, written by user 65534, for root's worker
  // that holds the inherited /dev/kfd.
  const auto forge = [&](pid_t pid, uid_t owner) {
    const auto stat = drm::read_proc_stat(pid);
    ASSERT_TRUE(stat);
    nlohmann::json record = real;
    record["pid"] = pid;
    record["start_time"] = stat->start_time;
    const std::string path = dir.path() + "/drm/kfd/" + std::to_string(pid) + ".json";
    ASSERT_TRUE(write_file_atomic(path, record.dump() + "\n", 0644).ok());
    ASSERT_EQ(::chown(path.c_str(), owner, owner), 0);
  };
  forge(sleeper, 0);
  forge(static_cast<pid_t>(p->workers()[0]), 65534);
  settle();
  const std::string proc = dir.path() + "/sys/class/kfd/kfd/proc/";
  EXPECT_FALSE(std::filesystem::exists(proc + std::to_string(sleeper)));
  EXPECT_FALSE(std::filesystem::exists(proc + std::to_string(p->workers()[0])));
  EXPECT_TRUE(std::filesystem::exists(proc + std::to_string(p->pid())));
  ::kill(sleeper, SIGKILL);
  ::waitpid(sleeper, nullptr, 0);

  struct stat st {};
  for (const char* shared : {"/drm", "/drm/clients", "/drm/kfd"}) {
    ASSERT_EQ(::stat((dir.path() + shared).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 01777u) << shared;  // no user replaces another's records
  }
  ASSERT_EQ(::stat((dir.path() + "/drm/kfd/" + std::to_string(p->pid()) + ".json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(DrmDriver, BareOpenGetsNoFdinfoAndTheDriverHoldsNoNode) {
  add("0000:03:00.0");
  const int fd = ::open((dir.path() + "/dev/dri/renderD128").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  settle();
  EXPECT_FALSE(has_fdinfo(static_cast<unsigned>(::getpid())));
  ::close(fd);
  for (const auto& file : open_files(static_cast<unsigned>(driver_))) {
    EXPECT_EQ(file.find("/dev/dri/"), std::string::npos) << file;
  }
}

// A user's tmpfs mounted over dev/dri in a mount namespace shows the same path in
// /proc/<pid>/fd; a descriptor of it, with another client's lock byte, is no holder of that client.
TEST_F(DrmDriver, ASameNamedNodeOnAnotherMountIsNotTheSimulatedOne) {
  add("0000:03:00.0");
  auto p = client({"--node", "renderD128", "--vram", "1GiB"});
  ASSERT_TRUE(p);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const std::string dri = dir.path() + "/dev/dri";
  const pid_t impostor = ::fork();
  if (impostor == 0) {
    ::close(ready[0]);
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", dri.c_str(), "tmpfs", 0, nullptr) != 0) {
      ::_exit(2);
    }
    const int fd = ::open((dri + "/renderD128").c_str(), O_RDWR | O_CREAT, 0666);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(p->client_id());
    fl.l_len = 1;
    if (fd < 0 || ::fcntl(fd, F_OFD_SETLK, &fl) != 0) ::_exit(3);
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the impostor could not mount its tmpfs";
  ::close(ready[0]);
  settle();
  EXPECT_FALSE(has_fdinfo(static_cast<unsigned>(impostor)));
  EXPECT_TRUE(has_fdinfo(p->pid()));
  ::kill(impostor, SIGKILL);
  ::waitpid(impostor, nullptr, 0);
}

TEST_F(DrmDriver, AmdgpuBefore519PrintsItsOwnFormat) {
  add("0000:03:00.0", {"--fdinfo", "legacy"});
  auto p = client({"--node", "renderD128", "--vram", "1GiB", "--gtt", "4MiB", "--busy", "50"});
  ASSERT_TRUE(p);
  const std::string text = fdinfo(p->pid(), p->fd());
  EXPECT_TRUE(contains(text, "\npdev:\t0000:03:00.0\npasid:\t")) << text;
  EXPECT_TRUE(contains(text, "\nvram mem:\t1048576 kB\ngtt mem:\t4096 kB\ncpu mem:\t0 kB\n")) << text;
  EXPECT_TRUE(contains(text, "\ngfx0:\t50.0%\n")) << text;
  EXPECT_FALSE(contains(text, "drm-")) << text;
}

TEST_F(DrmDriver, EngineTimeGrowsByTheBusyShare) {
  add("0000:03:00.0");
  auto p = client({"--node", "renderD128", "--busy", "50"});
  ASSERT_TRUE(p);
  const auto engine = [&] {
    const std::string text = fdinfo(p->pid(), p->fd());
    const auto at = text.find("drm-engine-gfx:\t");
    return at == std::string::npos ? 0ull : std::stoull(text.substr(at + 16));
  };
  const auto first = engine();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(300ms);
  settle();
  const auto grown = engine() - first;
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(grown, 100'000'000ull);  // at least half of 200 ms
  EXPECT_LT(grown, static_cast<unsigned long long>(elapsed) / 2 + 200'000'000ull);  // + a stalled cycle
}

TEST_F(DrmDriver, IntelDevicesHaveTheirKeysAndNoVramFiles) {
  add("0000:03:00.0", {"--driver", "i915", "--vram", "8GiB"});
  add("0000:04:00.0", {"--driver", "xe", "--card", "2", "--render", "129"});
  const std::string dev = dir.path() + "/sys/devices/0000:03:00.0";
  EXPECT_EQ(read_file(dev + "/vendor").data, "0x8086\n");
  EXPECT_TRUE(contains(read_file(dev + "/uevent").data, "DRIVER=i915\n"));
  EXPECT_FALSE(std::filesystem::exists(dev + "/mem_info_vram_used"));
  EXPECT_EQ(read_file(dir.path() + "/sys/class/drm/renderD128/dev").data, "226:128\n");
  EXPECT_EQ(std::filesystem::canonical(dir.path() + "/sys/class/drm/card1/device"), std::filesystem::canonical(dev));
  auto i915 = client({"--node", "renderD128", "--vram", "1GiB"});
  auto xe = client({"--node", "renderD129", "--vram", "512MiB", "--busy", "10"});
  ASSERT_TRUE(i915 && xe);
  const std::string a = fdinfo(i915->pid(), i915->fd());
  EXPECT_TRUE(contains(a, "drm-driver:\ti915\n")) << a;
  EXPECT_TRUE(contains(a, "drm-total-local0:\t1024 MiB\n")) << a;
  EXPECT_TRUE(contains(a, "drm-engine-render:\t")) << a;
  const std::string b = fdinfo(xe->pid(), xe->fd());
  EXPECT_TRUE(contains(b, "drm-driver:\txe\n")) << b;
  EXPECT_TRUE(contains(b, "drm-total-vram0:\t512 MiB\n")) << b;
  EXPECT_TRUE(contains(b, "drm-cycles-ccs:\t")) << b;
  EXPECT_TRUE(contains(b, "drm-total-cycles-ccs:\t")) << b;
}

TEST_F(DrmDriver, XgmiHiveIsLaidOutAsAmdgpuDoes) {
  add("0000:03:00.0", {"--xgmi-hive", "1a2b"});
  add("0000:04:00.0", {"--xgmi-hive", "1a2b", "--card", "2", "--render", "129"});
  const std::string sys = dir.path() + "/sys/devices/";
  EXPECT_EQ(read_file(sys + "0000:03:00.0/xgmi_hive_info/xgmi_hive_id").data, "6699\n");
  EXPECT_EQ(read_file(sys + "0000:04:00.0/xgmi_hive_info/xgmi_hive_id").data, "6699\n");  // the link
  EXPECT_EQ(std::filesystem::canonical(sys + "0000:03:00.0/xgmi_hive_info/node2"),
            std::filesystem::canonical(sys + "0000:04:00.0"));
  EXPECT_TRUE(std::filesystem::exists(sys + "0000:04:00.0/xgmi_device_id"));
}

TEST(DrmSize, LargestExactUnit) {
  EXPECT_EQ(drm::drm_size(0), "0");
  EXPECT_EQ(drm::drm_size(1023), "1023");
  EXPECT_EQ(drm::drm_size(1024), "1 KiB");
  EXPECT_EQ(drm::drm_size(1536), "1536");
  EXPECT_EQ(drm::drm_size(3 * MiB + 1024), "3073 KiB");
  EXPECT_EQ(drm::drm_size(2 * GiB), "2048 MiB");
}

}  // namespace
}  // namespace gpusim::test
