// A real OCI container for the tests: Debian's runc runs a bundle whose root filesystem is an
// empty directory with the host's /usr, /etc and /tmp, the build tree and the host's procfs
// bind-mounted into it (no image, nothing downloaded), in PID, mount, IPC, UTS and network
// namespaces of its own, with Docker's default capabilities. podman and crun refuse this
// machine's hybrid cgroup hierarchy; runc runs here and is what Docker, containerd and CRI-O
// run underneath.
//
// The cgroup is what the caller asks for (linux.cgroupsPath), as the runtimes above runc ask:
// Docker's cgroupfs driver passes /docker/<id>, podman's /libpod_parent/libpod-<id>, a kubelet
// /kubepods/<qos>/pod<uid>/<id>. runc creates it in every v1 hierarchy and in the v2 one. With
// none given runc makes /<id> below its own cgroup in each hierarchy.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "sim_harness.hpp"

namespace gpureap::test {

struct OciSpec {
  std::string id;                           // runc's container id (Docker: the 64-hex id)
  std::vector<std::string> args;            // process.args; args[0] an absolute path
  std::map<std::string, std::string> env;   // besides PATH and the sanitizers' options
  std::string cgroups_path;                 // linux.cgroupsPath; "" for runc's default
  bool host_pid_namespace = false;          // `docker run --pid=host`
  // The GPUs' device files: the character (or block) devices in it are allowed in the
  // container's device cgroup, as `docker run --gpus` allows /dev/nvidia*; all others are
  // denied but for runc's defaults (/dev/null, /dev/zero, ...).
  std::string gpu_device_dir;
  // `runc run --detach`, as containerd's shim starts containers: runc returns once the init
  // runs, and nothing ends the rest of the container when the init dies (with the host's PID
  // namespace) until `runc delete`.
  bool detach = false;
};

// A random id of 64 lower-case hex digits, as Docker, containerd and podman make them.
std::string random_container_id();

class OciContainer {
 public:
  // runc is installed and we are root (runc needs both here).
  static bool available();
  // Writes the bundle (config.json and the empty root) in a fresh directory under /tmp.
  explicit OciContainer(OciSpec spec);
  // SIGKILLs what still runs in it, `runc delete --force`, removes the bundle.
  ~OciContainer();
  OciContainer(const OciContainer&) = delete;
  OciContainer& operator=(const OciContainer&) = delete;

  // `runc run` in the foreground as our child, the container's stdout a pipe we read: true
  // once the container printed a first line (into *first_line) within the timeout.
  bool start(std::string* first_line, int timeout_ms = 15000);
  // `runc run` without waiting for anything: containers launched together start side by side;
  // next_line() then reads what each prints.
  bool launch();
  // The next line the container prints, or "" at the timeout or its end.
  std::string next_line(int timeout_ms = 10000);
  // Everything else it prints, until its stdout closes or the timeout.
  std::string rest_of_output(int timeout_ms = 10000);
  // Waits for `runc run` to exit: the container's exit status as runc reports it (the init's
  // status, 128 + signal when a signal ended it), or -1 at the timeout.
  int wait_exit(int timeout_ms = 10000);
  // runc <args...>, e.g. {"kill", id(), "TERM"}.
  CommandResult runc(const std::vector<std::string>& args) const;
  // The host PID of the container's init, from `runc state`; -1 when it has none.
  pid_t init_pid() const;
  // runc's and the container's stderr so far, for failure messages.
  std::string log() const;
  const std::string& id() const { return spec_.id; }

 private:
  void write_bundle();
  // Appends what the container prints to pending_ until a whole line is there (until_line),
  // its stdout closes, or the timeout.
  void read_output(int timeout_ms, bool until_line);
  OciSpec spec_;
  std::string bundle_;
  pid_t runc_pid_ = -1;
  int stdout_fd_ = -1;
  std::string pending_;
  int exit_status_ = -1;
};

}  // namespace gpureap::test
