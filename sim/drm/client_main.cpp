// gpusim-drm-client: a process that uses a simulated DRM GPU as a real one would. It opens
// dev/dri/<node> O_RDWR without O_CLOEXEC (forked workers inherit the descriptor and with it the
// same client, as with a real DRM file), takes a client id, and marks its open file description
// with an OFD write lock on byte [id, id+1) of the node file: the lock lives exactly as long as
// the description (inherited across fork and dup, released when its last descriptor closes,
// however the holders die), which is how long the kernel keeps a DRM client. It then records the
// client (drm/clients/<id>.json). With --kfd it opens dev/kfd, marks that open file description
// with an OFD lock on a byte of its own (the kernel's KFD process lives as long as the open file's
// reference to it, kfd_chardev.c kfd_open()/kfd_release()) and records the VRAM of its KFD
// process. It forks --workers, prints
//   READY pid=<host pid> nspid=<pid> workers=<host pid>,<host pid> client=<id> fd=<fd>
// and waits for SIGTERM (exit 0) or SIGKILL. The PIDs are the host's, as the kernel records them
// (a KFD process is named by lead_thread->pid, the PID in the initial namespace), also when the
// client runs in a child PID namespace (`unshare -pf`); nspid is getpid().
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <string>

#include "common/clock.hpp"
#include "common/file_io.hpp"
#include "common/host_pid.hpp"
#include "common/layout.hpp"
#include "common/size.hpp"
#include "drm/drm_state.hpp"

using namespace gpusim;
using namespace gpusim::drm;

namespace {

int die(const std::string& message) {
  fmt::print(stderr, "gpusim-drm-client: error: {}\n", message);
  return 1;
}

// An OFD write lock on byte [id, id+1) of the file `fd` describes: it lives exactly as long as
// that open file description.
bool lock_byte(int fd, std::uint64_t id) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(id);
  fl.l_len = 1;
  return ::fcntl(fd, F_OFD_SETLK, &fl) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpusim-drm-client: a process holding a simulated DRM GPU's node (docs/simulator.md)"};
  std::string state, node, vram = "0", gtt = "0", shared = "0";
  bool kfd = false;
  unsigned workers = 0, busy = 0;
  app.add_option("--state", state, "simulator state directory (default: $GPUSIM_STATE_DIR)");
  app.add_option("--node", node, "the node to open: renderD128, card1")->required();
  app.add_option("--vram", vram, "VRAM the client allocates (SIZE)");
  app.add_option("--gtt", gtt, "GTT (system memory mapped for the GPU) it allocates (SIZE)");
  app.add_option("--shared", shared, "of its VRAM, how much is shared with other clients (SIZE)");
  app.add_flag("--kfd", kfd, "also open dev/kfd as ROCm does: a KFD process holding the same VRAM");
  app.add_option("--workers", workers, "forked workers inheriting the descriptor")->check(CLI::Range(0u, 64u));
  app.add_option("--busy", busy, "engine busy share, percent")->check(CLI::Range(0u, 100u));
  CLI11_PARSE(app, argc, argv);

  if (state.empty()) {
    auto env = state_dir_from_env();
    if (!env) return die("no state directory: pass --state DIR or set GPUSIM_STATE_DIR");
    state = *env;
  }
  const DrmLayout layout(state);
  auto devices = load_devices(layout);
  if (!devices.ok()) return die(devices.error().message);
  const DrmDevice* device = device_with_node(*devices, node);
  if (device == nullptr) return die(fmt::format("no simulated DRM device has a node {} (run `gpusim drm-add`)", node));
  if (kfd && !device->kfd) return die(device->pci + " was added without --kfd");
  ClientRecord client;
  for (auto [text, out] : {std::pair{&vram, &client.vram}, {&gtt, &client.gtt}, {&shared, &client.shared}}) {
    auto bytes = parse_size(*text);
    if (!bytes.ok()) return die(*text + ": " + bytes.error().message);
    *out = *bytes;
  }
  if (client.shared > client.vram) return die("--shared is part of --vram and cannot exceed it");

  // Termination signals wait in the mask until the idle loop, so none is lost.
  sigset_t waited;
  sigemptyset(&waited);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&waited, sig);
  ::sigprocmask(SIG_BLOCK, &waited, nullptr);

  const int fd = ::open(layout.dri_node(node).c_str(), O_RDWR);  // no O_CLOEXEC: inherited, as DRM fds are
  if (fd < 0) return die(layout.dri_node(node) + ": " + errno_text(errno));
  auto id = allocate_client_id(layout);
  if (!id.ok()) return die(id.error().message);
  if (!lock_byte(fd, *id)) return die("F_OFD_SETLK on " + node + ": " + errno_text(errno));
  const pid_t self = host_pid();
  if (self <= 0) return die("cannot read the host PID from /proc/self (or $GPUSIM_HOST_PROC/self)");

  client.id = *id;
  client.pci = device->pci;
  client.node = node;
  client.busy_percent = busy;
  client.start_ns = realtime_ns();
  client.pid = self;
  // amdgpu gives each open file's VM a PASID (amdgpu_driver_open_kms); 0x8000 + id here.
  client.pasid = device->driver == "amdgpu" ? static_cast<std::uint32_t>(0x8000 + *id % 0x7fff) : 0;
  if (auto st = store_client(layout, client); !st.ok()) return die(st.error().message);

  int kfd_fd = -1;
  if (kfd) {
    // The ROCm runtime (libhsakmt) opens /dev/kfd O_RDWR | O_CLOEXEC; fork keeps it.
    kfd_fd = ::open(layout.kfd_dev().c_str(), O_RDWR | O_CLOEXEC);
    if (kfd_fd < 0) return die(layout.kfd_dev() + ": " + errno_text(errno));
    auto kfd_id = allocate_client_id(layout);
    if (!kfd_id.ok()) return die(kfd_id.error().message);
    if (!lock_byte(kfd_fd, *kfd_id)) return die("F_OFD_SETLK on " + layout.kfd_dev() + ": " + errno_text(errno));
    const auto stat = read_proc_stat_file("/proc/self/stat");
    if (!stat) return die("cannot read /proc/self/stat");
    KfdRecord record;
    record.pid = self;
    record.start_time = stat->start_time;
    record.lock = *kfd_id;
    record.pasid = client.pasid;
    record.vram.emplace_back(device->gpu_id, client.vram);
    if (auto st = store_kfd(layout, record); !st.ok()) return die(st.error().message);
  }

  std::fflush(nullptr);
  // Each worker sends its host PID back through the pipe, as fork() answers in our namespace.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return die("pipe: " + errno_text(errno));
  std::string list;
  for (unsigned i = 0; i < workers; ++i) {
    const pid_t child = ::fork();
    if (child < 0) return die("fork: " + errno_text(errno));
    if (child == 0) {
      ::close(report[0]);
      const pid_t mine = host_pid();
      (void)!::write(report[1], &mine, sizeof mine);
      ::close(report[1]);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      for (;;) ::pause();
    }
    pid_t reported = 0;
    if (::read(report[0], &reported, sizeof reported) != static_cast<ssize_t>(sizeof reported) || reported <= 0) {
      return die("a worker did not report its host PID");
    }
    list += (list.empty() ? "" : ",") + std::to_string(reported);
  }
  ::close(report[0]);
  ::close(report[1]);
  fmt::print("READY pid={} nspid={} workers={} client={} fd={}\n", self, ::getpid(), list, *id, fd);
  std::fflush(stdout);

  for (;;) {
    const int sig = ::sigwaitinfo(&waited, nullptr);
    if (sig == SIGCHLD) {
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      continue;
    }
    if (sig > 0) break;
  }
  return 0;
}
