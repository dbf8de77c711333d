#include "drm/driver_loop.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "common/clock.hpp"
#include "common/file_io.hpp"
#include "drm/device_tree.hpp"
#include "drm/fdinfo_text.hpp"

namespace gpusim::drm {
namespace fs = std::filesystem;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

// A descriptor of one of the simulated device files: a DRM node, or dev/kfd (node "kfd").
struct DriDescriptor {
  pid_t pid = 0;
  int fd = -1;
  std::string node;
  uid_t uid = 0;
  std::string generic;                  // pos/flags/mnt_id/ino lines of the real fdinfo
  std::vector<std::uint64_t> lock_ids;  // start bytes of the description's OFD locks
};

struct Releasing {
  std::string pci;
  std::uint64_t vram = 0;
  std::int64_t until_ns = 0;
};

bool all_digits(const char* s) {
  if (*s == '\0') return false;
  for (; *s != '\0'; ++s) {
    if (*s < '0' || *s > '9') return false;
  }
  return true;
}

// The real fdinfo of one descriptor: its generic lines, and the OFD locks listed for its open
// file description ("lock:\t1: OFDLCK ADVISORY  WRITE -1 fe:00:1234 7 7").
void read_real_fdinfo(DriDescriptor& d) {
  ReadResult r = read_file(fmt::format("/proc/{}/fdinfo/{}", d.pid, d.fd));
  if (!r.ok()) return;
  std::size_t at = 0;
  while (at < r.data.size()) {
    std::size_t end = r.data.find('\n', at);
    if (end == std::string::npos) end = r.data.size();
    const std::string line = r.data.substr(at, end - at);
    at = end + 1;
    if (line.rfind("lock:", 0) == 0) {
      if (line.find(" OFDLCK ") == std::string::npos) continue;
      // The last two fields are the start and end bytes.
      const auto last = line.find_last_of(' ');
      const auto before = line.find_last_of(' ', last - 1);
      if (last == std::string::npos || before == std::string::npos) continue;
      char* stop = nullptr;
      const unsigned long long start = std::strtoull(line.c_str() + before + 1, &stop, 10);
      if (stop == line.c_str() + last) d.lock_ids.push_back(start);
    } else if (line.rfind("pos:", 0) == 0 || line.rfind("flags:", 0) == 0 || line.rfind("mnt_id:", 0) == 0 ||
               line.rfind("ino:", 0) == 0) {
      d.generic += line + "\n";
    }
  }
}

class Driver {
 public:
  Driver(DrmLayout layout, unsigned period_ms) : layout_(std::move(layout)), period_ms_(period_ms) {
    char resolved[PATH_MAX];
    dev_dir_ = ::realpath(layout_.dev_dir().c_str(), resolved) != nullptr ? resolved : layout_.dev_dir();
    root_ = ::geteuid() == 0;
  }

  int run() {
    std::uint64_t cycles = 0;
    while (!g_stop) {
      cycle();
      ++cycles;
      (void)write_file_atomic(layout_.cycle(), std::to_string(cycles) + "\n", 0644);
      timespec ts{0, static_cast<long>(period_ms_) * 1000000L};
      ::nanosleep(&ts, nullptr);
      if (::getppid() != parent_) break;  // the parent died (PR_SET_PDEATHSIG covers the rest)
    }
    return 0;
  }

  void set_parent(pid_t parent) { parent_ = parent; }

 private:
  void cycle() {
    const std::int64_t now = realtime_ns();
    auto loaded = load_devices(layout_);
    if (!loaded.ok()) return;
    devices_ = std::move(*loaded);
    std::vector<DriDescriptor> held, kfd_held;
    scan_proc(node_files(), held, kfd_held);
    std::map<std::uint64_t, ClientRecord> clients = live_clients(now);
    write_fdinfo(held, clients, now);
    write_vram_used(clients, now);
    update_kfd(kfd_held);
  }

  // The device files' identities (st_dev, st_ino) and names: a descriptor is of a simulated
  // node only when its file is that inode, not merely when its path reads the same (a user's
  // tmpfs mounted over dev/dri in a mount namespace shows the same path in /proc/<pid>/fd).
  std::map<std::pair<dev_t, ino_t>, std::string> node_files() const {
    std::map<std::pair<dev_t, ino_t>, std::string> files;
    const auto add = [&](const std::string& path, const std::string& name) {
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0) files.emplace(std::pair{st.st_dev, st.st_ino}, name);
    };
    for (const auto& device : devices_) {
      for (const auto& node : {device.card_node(), device.render_node()}) add(layout_.dri_node(node), node);
      if (device.kfd) add(layout_.kfd_dev(), "kfd");
    }
    return files;
  }

  void scan_proc(const std::map<std::pair<dev_t, ino_t>, std::string>& files, std::vector<DriDescriptor>& held,
                 std::vector<DriDescriptor>& kfd_held) {
    const std::string dri = dev_dir_ + "/dri/";
    const std::string kfd = dev_dir_ + "/kfd";
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) return;
    while (const dirent* e = ::readdir(proc)) {
      if (!all_digits(e->d_name)) continue;
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      const std::string fd_dir = std::string("/proc/") + e->d_name + "/fd";
      DIR* fds = ::opendir(fd_dir.c_str());
      if (fds == nullptr) continue;
      uid_t uid = 0;
      struct stat st {};
      if (::stat((std::string("/proc/") + e->d_name).c_str(), &st) == 0) uid = st.st_uid;
      while (const dirent* f = ::readdir(fds)) {
        if (!all_digits(f->d_name)) continue;
        char target[PATH_MAX];
        const ssize_t n = ::readlink((fd_dir + "/" + f->d_name).c_str(), target, sizeof target - 1);
        if (n <= 0) continue;
        const std::string link(target, static_cast<std::size_t>(n));
        if (link != kfd && link.rfind(dri, 0) != 0) continue;
        struct stat file {};
        if (::stat((fd_dir + "/" + f->d_name).c_str(), &file) != 0) continue;
        const auto found = files.find({file.st_dev, file.st_ino});
        if (found == files.end()) continue;  // the same path on another mount
        DriDescriptor d;
        d.pid = pid;
        d.fd = std::atoi(f->d_name);
        d.node = found->second;
        d.uid = uid;
        read_real_fdinfo(d);
        (d.node == "kfd" ? kfd_held : held).push_back(std::move(d));
      }
      ::closedir(fds);
    }
    ::closedir(proc);
  }

  // Whether some open file description holds the OFD lock on byte `id` of `node`.
  bool lock_held(const std::string& node, std::uint64_t id) {
    const int fd = ::open(layout_.node_link(node).c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return false;
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(id);
    fl.l_len = 1;
    const bool held = ::fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    ::close(fd);
    return held;
  }

  std::map<std::uint64_t, ClientRecord> live_clients(std::int64_t now) {
    std::map<std::uint64_t, ClientRecord> live;
    auto names = list_dir(layout_.clients_dir());
    if (!names.ok()) return live;
    for (const auto& name : *names) {
      if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0 || name[0] == '.') continue;
      const std::string path = layout_.clients_dir() + "/" + name;
      auto client = load_client(path);
      if (!client.ok()) continue;
      if (lock_held(client->node, client->id)) {
        live.emplace(client->id, *client);
        continue;
      }
      // Closed: the last descriptor of its open file description is gone.
      const DrmDevice* device = device_with_node(devices_, client->node);
      if (device != nullptr && device->release_delay_ms > 0) {
        releasing_.push_back({device->pci, client->vram, now + static_cast<std::int64_t>(device->release_delay_ms) * 1000000});
      }
      ::unlink(path.c_str());
    }
    std::erase_if(releasing_, [now](const Releasing& r) { return r.until_ns <= now; });
    return live;
  }

  void own_dir(const std::string& path, uid_t uid) {
    (void)make_dir_if_missing(path);
    if (root_) {
      (void)::chown(path.c_str(), uid, static_cast<gid_t>(-1));
      (void)::chmod(path.c_str(), 0500);
    } else {
      (void)::chmod(path.c_str(), 0755);
    }
  }

  void write_fdinfo(const std::vector<DriDescriptor>& held, const std::map<std::uint64_t, ClientRecord>& clients,
                    std::int64_t now) {
    std::set<std::string> wanted;
    for (const auto& d : held) {
      const ClientRecord* client = nullptr;
      for (const std::uint64_t id : d.lock_ids) {
        const auto found = clients.find(id);
        if (found != clients.end() && found->second.node == d.node) client = &found->second;
      }
      const DrmDevice* device = device_with_node(devices_, d.node);
      if (client == nullptr || device == nullptr) continue;
      const std::string pid_dir = layout_.fdinfo_root() + "/" + std::to_string(d.pid);
      own_dir(pid_dir, d.uid);
      own_dir(pid_dir + "/fdinfo", d.uid);
      const std::string path = pid_dir + "/fdinfo/" + std::to_string(d.fd);
      write_if_changed(path, fdinfo_text(*device, *client, now, d.generic), 0444);
      wanted.insert(path);
    }
    // Descriptors no longer held (closed, or their process died): their files go.
    auto pids = list_dir(layout_.fdinfo_root());
    if (!pids.ok()) return;
    for (const auto& pid : *pids) {
      const std::string dir = layout_.fdinfo_root() + "/" + pid + "/fdinfo";
      auto fds = list_dir(dir);
      std::size_t kept = 0;
      if (fds.ok()) {
        for (const auto& fd : *fds) {
          const std::string path = dir + "/" + fd;
          if (wanted.count(path)) {
            ++kept;
          } else {
            ::unlink(path.c_str());
          }
        }
      }
      if (kept == 0) (void)remove_tree(layout_.fdinfo_root() + "/" + pid);
    }
  }

  void write_vram_used(const std::map<std::uint64_t, ClientRecord>& clients, std::int64_t now) {
    for (const auto& device : devices_) {
      if (device.driver != "amdgpu") continue;
      std::uint64_t used = device.driver_vram;
      for (const auto& [id, client] : clients) {
        if (client.pci == device.pci) used += client.vram;
      }
      for (const auto& r : releasing_) {
        if (r.pci == device.pci && r.until_ns > now) used += r.vram;
      }
      write_if_changed(layout_.sys_device(device.pci) + "/mem_info_vram_used", fmt::format("{}\n", used), 0444);
    }
  }

  // class/kfd/kfd/proc/<pid>/ lives as long as the kernel's KFD process: the open file of
  // /dev/kfd holds a reference to it (kfd_chardev.c kfd_open(): "filep now owns the reference";
  // kfd_release() drops it), the mm's notifier another (dropped when the mm goes, at exit or
  // exec), and the directory goes with the last reference (kfd_process.c kfd_process_wq_release()
  // -> kfd_process_remove_sysfs()). So it stays, under the opener's PID, while any descriptor of
  // that open file is left, in forked workers too, even after the opener died.
  //
  // The driver shows a record only for a process it saw holding dev/kfd itself: the process is
  // alive with the record's start time and owner, and one of its descriptors of dev/kfd carries
  // the record's OFD lock. From then on the lock alone keeps it.
  void update_kfd(const std::vector<DriDescriptor>& kfd_held) {
    std::set<std::string> live;
    std::map<pid_t, std::uint64_t> accepted;
    auto names = list_dir(layout_.kfd_dir());
    if (names.ok()) {
      for (const auto& name : *names) {
        if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0 || name[0] == '.') continue;
        const std::string path = layout_.kfd_dir() + "/" + name;
        auto record = load_kfd(path);
        struct stat owner {};
        if (!record.ok() || ::stat(path.c_str(), &owner) != 0) continue;
        const bool held = lock_held("kfd", record->lock);
        const auto known = accepted_.find(record->pid);
        if (known == accepted_.end() || known->second != record->lock) {
          if (!held) {
            ::unlink(path.c_str());  // nothing holds what it claims
          }
          if (!held || !opened_by(*record, owner.st_uid, kfd_held) || claimed(record->lock, accepted)) continue;
        } else if (!held) {
          ::unlink(path.c_str());  // the last descriptor of its open file is gone
          continue;
        }
        accepted.emplace(record->pid, record->lock);
        live.insert(std::to_string(record->pid));
        write_kfd_process(*record);
      }
    }
    accepted_ = std::move(accepted);
    auto dirs = list_dir(layout_.kfd_sys() + "/proc");
    if (!dirs.ok()) return;
    for (const auto& pid : *dirs) {
      if (!live.count(pid)) (void)remove_tree(layout_.kfd_sys() + "/proc/" + pid);
    }
  }

  // Whether another record was shown for the open file `lock` marks (one KFD process per open).
  bool claimed(std::uint64_t lock, const std::map<pid_t, std::uint64_t>& now) const {
    const auto has = [lock](const auto& entry) { return entry.second == lock; };
    return std::any_of(accepted_.begin(), accepted_.end(), has) || std::any_of(now.begin(), now.end(), has);
  }

  // Whether the record's process, alive as recorded and owned by the record's owner, holds a
  // descriptor of dev/kfd whose open file description carries the record's lock.
  static bool opened_by(const KfdRecord& record, uid_t owner, const std::vector<DriDescriptor>& kfd_held) {
    for (const auto& d : kfd_held) {
      if (d.pid != record.pid || d.uid != owner) continue;
      if (std::find(d.lock_ids.begin(), d.lock_ids.end(), record.lock) == d.lock_ids.end()) continue;
      const auto stat = read_proc_stat(record.pid);
      return stat && !stat->zombie && stat->start_time == record.start_time;
    }
    return false;
  }

  // kfd_process.c: proc/<pid>/pasid; per GPU vram_<gpu_id> (bytes), sdma_<gpu_id> (usecs),
  // stats_<gpu_id>/{evicted_ms,cu_occupancy}, counters_<gpu_id>/{faults,page_in,page_out};
  // queues/.
  void write_kfd_process(const KfdRecord& k) {
    const std::string dir = layout_.kfd_proc(k.pid);
    if (fs::exists(dir + "/pasid")) return;  // the files are written once, when the process appears
    const std::string tmp = layout_.kfd_sys() + "/proc/." + std::to_string(k.pid) + ".new";
    (void)remove_tree(tmp);
    std::error_code ec;
    fs::create_directories(tmp + "/queues", ec);
    (void)write_file_atomic(tmp + "/pasid", fmt::format("{}\n", k.pasid), 0444);
    for (const auto& [gpu_id, bytes] : k.vram) {
      (void)write_file_atomic(fmt::format("{}/vram_{}", tmp, gpu_id), fmt::format("{}\n", bytes), 0444);
      (void)write_file_atomic(fmt::format("{}/sdma_{}", tmp, gpu_id), "0\n", 0444);
      const std::string stats = fmt::format("{}/stats_{}", tmp, gpu_id);
      const std::string counters = fmt::format("{}/counters_{}", tmp, gpu_id);
      fs::create_directories(stats, ec);
      fs::create_directories(counters, ec);
      (void)write_file_atomic(stats + "/evicted_ms", "0\n", 0444);
      (void)write_file_atomic(stats + "/cu_occupancy", "0\n", 0444);
      for (const char* name : {"faults", "page_in", "page_out"}) {
        (void)write_file_atomic(counters + "/" + name, "0\n", 0444);
      }
    }
    // Appears whole: readers never see the directory without its files.
    if (::rename(tmp.c_str(), dir.c_str()) != 0) (void)remove_tree(tmp);
  }

  DrmLayout layout_;
  unsigned period_ms_;
  std::string dev_dir_;
  bool root_ = false;
  pid_t parent_ = 0;
  std::vector<DrmDevice> devices_;
  std::vector<Releasing> releasing_;
  std::map<pid_t, std::uint64_t> accepted_;  // KFD processes shown: PID -> the lock of their open file
};

}  // namespace

int run_driver(const DrmLayout& layout, unsigned period_ms) {
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
  if (::getppid() != parent) return 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  Driver driver(layout, period_ms);
  driver.set_parent(parent);
  return driver.run();
}

}  // namespace gpusim::drm
