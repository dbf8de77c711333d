// Real containers: Debian's runc runs each one (tests/integration/oci_container.hpp), with a
// simulated GPU process inside. What runc creates here is what the tests check gpureap against:
// the cgroup paths of every runtime format gpureap names containers from, `ps` inside a
// container, `kill --container`, `gpureap run` as the container's PID 1, and `reap --cgroup`
// on the cgroup of a container whose init the runtime killed.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "oci_container.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

#define SKIP_WITHOUT_RUNC()                                                                              \
  if (!OciContainer::available()) GTEST_SKIP() << "needs root and runc (/usr/sbin/runc: apt-get install runc)"

// What gpusim-cuda's READY line says: its host PID (the driver's), its PID in the container,
// its workers' host PIDs.
struct Ready {
  pid_t pid = -1;
  pid_t ns_pid = -1;
  std::vector<pid_t> workers;
};

Ready parse_ready(const std::string& line) {
  Ready ready;
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "pid") ready.pid = std::stoi(value);
    if (key == "nspid") ready.ns_pid = std::stoi(value);
    if (key == "workers") {
      std::istringstream list(value);
      for (std::string pid; std::getline(list, pid, ',');) ready.workers.push_back(std::stoi(pid));
    }
  }
  return ready;
}

// A container whose init is gpusim-cuda with `sim_args`.
struct GpuContainer {
  std::unique_ptr<OciContainer> container;
  Ready ready;
};

GpuContainer launch_gpu_container(const SimHost& host, const std::string& id, const std::string& cgroups_path,
                                  const std::vector<std::string>& sim_args) {
  OciSpec spec;
  spec.id = id;
  spec.cgroups_path = cgroups_path;
  spec.args = {GPUSIM_CUDA_BINARY};
  spec.args.insert(spec.args.end(), sim_args.begin(), sim_args.end());
  spec.env = host.env();
  spec.gpu_device_dir = host.dev_dir();
  GpuContainer started{std::make_unique<OciContainer>(spec), {}};
  if (!started.container->launch()) ADD_FAILURE() << "runc could not be started for " << cgroups_path;
  return started;
}

// Waits for a launched container's READY line.
void wait_ready(GpuContainer& started) {
  const std::string line = started.container->next_line(15000);
  if (line.rfind("READY", 0) != 0) {
    ADD_FAILURE() << "container " << started.container->id() << " did not become ready: '" << line << "'\n"
                  << started.container->log();
    return;
  }
  started.ready = parse_ready(line);
}

GpuContainer start_gpu_container(const SimHost& host, const std::string& id, const std::string& cgroups_path,
                                 const std::vector<std::string>& sim_args) {
  GpuContainer started = launch_gpu_container(host, id, cgroups_path, sim_args);
  wait_ready(started);
  return started;
}

// The cgroup path of each hierarchy in /proc/<pid>/cgroup ("4:memory:/docker/…" gives
// "/docker/…"), v1 and v2 alike.
std::vector<std::string> cgroup_paths_of(pid_t pid) {
  std::vector<std::string> paths;
  std::istringstream lines(read_text_file("/proc/" + std::to_string(pid) + "/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    const auto second = line.find(':', line.find(':') + 1);
    if (second != std::string::npos) paths.push_back(line.substr(second + 1));
  }
  return paths;
}

std::string pod_uid() {
  const std::string hex = random_container_id();
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20, 12);
}

std::string underscored(std::string uid) {
  std::replace(uid.begin(), uid.end(), '-', '_');
  return uid;
}

// A runtime's cgroup for one container as the runtime hands it to runc (its cgroupfs driver),
// or as runc's systemd driver would expand the runtime's "slice:prefix:id" (no systemd runs
// here, so runc creates that path itself), and what gpureap should name it.
struct RuntimeFormat {
  std::string name;
  std::string cgroups_path;
  std::string runtime;  // "" when gpureap must not call it a container
  std::string id;
  std::string pod_uid;
};

std::vector<RuntimeFormat> runtime_formats() {
  std::vector<RuntimeFormat> formats;
  const auto add = [&](std::string name, std::string path, std::string runtime, std::string id, std::string pod) {
    formats.push_back({std::move(name), std::move(path), std::move(runtime), std::move(id), std::move(pod)});
  };
  std::string id = random_container_id();
  add("docker cgroupfs", "/docker/" + id, "docker", id, "");
  id = random_container_id();
  add("docker systemd", "/system.slice/docker-" + id + ".scope", "docker", id, "");
  id = random_container_id();
  add("podman cgroupfs", "/libpod_parent/libpod-" + id, "podman", id, "");
  id = random_container_id();
  add("podman systemd", "/machine.slice/libpod-" + id + ".scope", "podman", id, "");
  id = random_container_id();
  add("podman split (Quadlet)", "/system.slice/gpureap-test-" + id.substr(0, 8) + ".service/libpod-payload-" + id,
      "podman", id, "");
  std::string pod = pod_uid();
  id = random_container_id();
  add("containerd CRI, systemd",
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + underscored(pod) +
          ".slice/cri-containerd-" + id + ".scope",
      "containerd", id, pod);
  pod = pod_uid();
  id = random_container_id();
  add("CRI-O, systemd",
      "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + underscored(pod) + ".slice/crio-" + id +
          ".scope",
      "cri-o", id, pod);
  pod = pod_uid();
  id = random_container_id();
  add("kubepods cgroupfs (containerd)", "/kubepods/burstable/pod" + pod + "/" + id, "kubernetes", id, pod);
  pod = pod_uid();
  id = random_container_id();
  add("kubepods cgroupfs, guaranteed (CRI-O)", "/kubepods/pod" + pod + "/crio-" + id, "cri-o", id, pod);
  // runc alone: /<id> below runc's own cgroup. Any program can make a cgroup of any name, so
  // a bare name is no evidence of a container.
  add("runc's default", "", "", "gpureap-test-" + random_container_id().substr(0, 12), "");
  return formats;
}

TEST(OciContainers, HostPsNamesEachRuntimesContainerInTheCgroupRuncCreates) {
  SKIP_WITHOUT_RUNC();
  SimHost host;
  const auto formats = runtime_formats();
  std::vector<GpuContainer> containers;
  // Side by side, as a node starts a pod's containers.
  for (const auto& format : formats) {
    containers.push_back(launch_gpu_container(host, format.id, format.cgroups_path, {"--alloc", "0:64MiB"}));
  }
  for (std::size_t i = 0; i < formats.size(); ++i) {
    wait_ready(containers[i]);
    ASSERT_GT(containers[i].ready.pid, 0) << formats[i].name;
  }
  const auto ps = host.ps_json();
  for (std::size_t i = 0; i < formats.size(); ++i) {
    const RuntimeFormat& format = formats[i];
    const Ready& ready = containers[i].ready;
    EXPECT_NE(ready.pid, ready.ns_pid) << format.name << ": the container has a PID namespace of its own";
    // What runc made: the path it was given (or /<id> below its own cgroup) in every v1
    // hierarchy and in the v2 one.
    const auto paths = cgroup_paths_of(ready.pid);
    ASSERT_GE(paths.size(), 2u) << format.name;
    for (const std::string& path : paths) {
      if (format.cgroups_path.empty()) {
        EXPECT_TRUE(path.ends_with("/" + format.id)) << format.name << ": " << path;
      } else {
        EXPECT_EQ(path, format.cgroups_path) << format.name;
      }
    }
    const auto* p = find_process(ps, ready.pid);
    ASSERT_NE(p, nullptr) << format.name << "\n" << ps.dump(2);
    EXPECT_EQ((*p)["identity"], "ok") << format.name;
    EXPECT_EQ((*p)["namespace_pid"], ready.ns_pid) << format.name;
    if (format.runtime.empty()) {
      EXPECT_TRUE((*p)["container"].is_null()) << format.name << ": " << p->dump(2);
      continue;
    }
    ASSERT_TRUE((*p)["container"].is_object()) << format.name << ": " << p->dump(2);
    EXPECT_EQ((*p)["container"]["runtime"], format.runtime) << format.name;
    EXPECT_EQ((*p)["container"]["id"], format.id) << format.name;
    if (format.pod_uid.empty()) {
      EXPECT_TRUE((*p)["container"]["pod_uid"].is_null()) << format.name;
    } else {
      EXPECT_EQ((*p)["container"]["pod_uid"], format.pod_uid) << format.name;
    }
  }
  // The short id users see in `docker ps` selects that container alone.
  const auto only = host.ps_json({"--container", formats[0].id.substr(0, 12)});
  ASSERT_EQ(only["processes"].size(), 1u) << only.dump(2);
  EXPECT_EQ(only["processes"][0]["pid"], containers[0].ready.pid);
}

// The GPU processes the driver lists on `gpu`, from the host.
std::vector<pid_t> listed_on(const SimHost& host, unsigned gpu) {
  std::vector<pid_t> pids;
  const auto ps = host.ps_json();
  for (const auto& p : ps.value("processes", nlohmann::json::array())) {
    if (p["gpu"] == gpu) pids.push_back(p["pid"].get<pid_t>());
  }
  return pids;
}

TEST(OciContainers, PsInsideAContainerShowsTheDriversHostPidsAsForeignBesideTheHoldersHere) {
  SKIP_WITHOUT_RUNC();
  SimHost host;
  auto outside = host.start({"--alloc", "1:1GiB"});  // on the host: nothing in the container holds GPU 1
  OciSpec spec;
  spec.id = random_container_id();
  spec.cgroups_path = "/docker/" + spec.id;
  spec.env = host.env();
  spec.gpu_device_dir = host.dev_dir();
  const std::string out = host.state_dir() + "/ps-inside.json";
  spec.args = {"/bin/sh", "-c",
               "\"$0\" --alloc 0:2GiB --workers 1 | { read -r ready; echo \"$ready\"; \"$1\" ps --json > \"$2\"; "
               "echo \"ps $?\"; }",
               GPUSIM_CUDA_BINARY, gpureap_binary(), out};
  OciContainer container(spec);
  std::string line;
  ASSERT_TRUE(container.start(&line)) << container.log();
  const Ready ready = parse_ready(line);
  ASSERT_GT(ready.pid, 0) << line;
  ASSERT_EQ(container.next_line(), "ps 0") << container.log();
  const auto ps = nlohmann::json::parse(read_text_file(out));
  EXPECT_TRUE(ps["host"]["in_child_pid_namespace"].get<bool>());
  // The driver's PIDs are the host's: neither is a process here.
  const auto* inside = find_process(ps, ready.pid);
  ASSERT_NE(inside, nullptr) << ps.dump(2);
  EXPECT_EQ((*inside)["identity"], "foreign") << inside->dump(2);
  EXPECT_EQ((*inside)["gpu_memory_bytes"], 2 * GiB);
  const auto* host_process = find_process(ps, outside.pid);
  ASSERT_NE(host_process, nullptr) << ps.dump(2);
  EXPECT_EQ((*host_process)["identity"], "foreign");
  // The container's own GPU process and its worker, by their PIDs here, hold GPU 0's device
  // file: the foreign entry on GPU 0 names them, the one on GPU 1 names nobody.
  const auto* owner = find_holder(ps, ready.ns_pid);
  ASSERT_NE(owner, nullptr) << ps.dump(2);
  EXPECT_EQ((*owner)["gpus"], nlohmann::json::array({0}));
  ASSERT_EQ(ps["holders"].size(), 2u) << ps["holders"].dump(2);
  std::vector<pid_t> holders_here;
  for (const auto& h : ps["holders"]) holders_here.push_back(h["pid"].get<pid_t>());
  std::sort(holders_here.begin(), holders_here.end());
  EXPECT_EQ((*inside)["holders_here"].get<std::vector<pid_t>>(), holders_here) << inside->dump(2);
  EXPECT_TRUE((*host_process)["holders_here"].empty()) << host_process->dump(2);
  EXPECT_NE((*inside)["identity_reason"].get<std::string>().find(std::to_string(ready.ns_pid)), std::string::npos)
      << inside->dump(2);
}

TEST(OciContainers, KillContainerEndsThatContainersGpuProcessesAndNothingOutside) {
  SKIP_WITHOUT_RUNC();
  SimHost host;
  auto on_host = host.start({"--alloc", "0:1GiB"});
  const std::string target_id = random_container_id();
  auto target = start_gpu_container(host, target_id, "/docker/" + target_id, {"--alloc", "0:2GiB", "--workers", "2"});
  const std::string other_id = random_container_id();
  auto other = start_gpu_container(host, other_id, "/docker/" + other_id, {"--alloc", "1:1GiB"});
  ASSERT_GT(target.ready.pid, 0);
  ASSERT_GT(other.ready.pid, 0);
  ASSERT_EQ(target.ready.workers.size(), 2u);

  int exit_code = -1;
  const auto report = kill_json(host, {"--container", target_id.substr(0, 12), "--yes"}, &exit_code);
  EXPECT_EQ(exit_code, 0) << report.dump(2);
  for (pid_t pid : {target.ready.pid, target.ready.workers[0], target.ready.workers[1]}) {
    EXPECT_FALSE(running(pid)) << pid << " of the container lives on\n" << report.dump(2);
  }
  const auto* gpu0 = kill_gpu(report, 0);
  ASSERT_NE(gpu0, nullptr) << report.dump(2);
  EXPECT_TRUE((*gpu0)["verified"].get<bool>()) << gpu0->dump(2);
  // Its init gone, the container is over: runc reports the init's status.
  EXPECT_EQ(target.container->wait_exit(), 0) << target.container->log();
  // The host's GPU process on the same GPU and the other container's are untouched.
  EXPECT_TRUE(running(on_host.pid));
  EXPECT_TRUE(running(other.ready.pid));
  EXPECT_EQ(listed_on(host, 0), std::vector<pid_t>{on_host.pid});
  EXPECT_EQ(listed_on(host, 1), std::vector<pid_t>{other.ready.pid});
}

// gpureap run as the container's entry point, the way ENTRYPOINT ["gpureap", "run", "--"]
// starts it: PID 1 of the container.
OciSpec run_entry_point(const SimHost& host, const std::string& script, std::vector<std::string> script_args) {
  OciSpec spec;
  spec.id = random_container_id();
  spec.cgroups_path = "/docker/" + spec.id;
  spec.env = host.env();
  spec.gpu_device_dir = host.dev_dir();
  spec.args = {gpureap_binary(), "run", "--json", "--kill-timeout", "2", "--verify-timeout", "5", "--",
               "/bin/sh", "-c", script, GPUSIM_CUDA_BINARY};
  spec.args.insert(spec.args.end(), script_args.begin(), script_args.end());
  return spec;
}

// The run report: the last JSON object the container printed.
nlohmann::json run_report(const std::string& output) {
  const auto start = output.rfind("\n{");
  try {
    return nlohmann::json::parse(output.substr(start == std::string::npos ? 0 : start + 1));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "no run report in: " << output;
    return nlohmann::json::object();
  }
}

// The processes in the PID namespace of `init` (host PIDs), each with its PID as that namespace
// numbers it (the last field of NSpid) and its state.
struct NamespacedProcess {
  pid_t pid = 0;
  pid_t ns_pid = 0;
  char state = '?';
};
std::vector<NamespacedProcess> processes_in_pid_namespace_of(pid_t init) {
  std::error_code error;
  const auto ns = std::filesystem::read_symlink("/proc/" + std::to_string(init) + "/ns/pid", error);
  std::vector<NamespacedProcess> processes;
  if (error) return processes;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    std::error_code link_error;
    if (std::filesystem::read_symlink(entry.path() / "ns/pid", link_error) != ns || link_error) continue;
    std::istringstream status(read_text_file((entry.path() / "status").string()));
    NamespacedProcess process{pid, 0, process_state(pid)};
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("NSpid:", 0) == 0) process.ns_pid = std::stoi(line.substr(line.find_last_of(" \t") + 1));
    }
    processes.push_back(process);
  }
  return processes;
}

// Zombies among them: what a PID 1 that reaps nothing leaves behind.
std::vector<pid_t> zombies_in_pid_namespace_of(pid_t init) {
  std::vector<pid_t> zombies;
  for (const auto& p : processes_in_pid_namespace_of(init)) {
    if (p.state == 'Z') zombies.push_back(p.pid);
  }
  return zombies;
}

TEST(OciContainers, RunAsEntryPointReapsOrphansEndsLeftoversAndExitsWithTheCommandsStatus) {
  SKIP_WITHOUT_RUNC();
  SimHost host;
  auto on_host = host.start({"--alloc", "1:1GiB"});
  const std::string go = host.state_dir() + "/go";
  // A GPU process that double-forks away from the command (reparented to PID 1, outliving
  // the command), an orphan that writes its PID (as the container numbers it) and exits while
  // the job runs, then exit 3 when the test says so.
  const std::string orphan_file = go + ".orphan";
  const std::string script =
      "( \"$0\" --alloc 0:1GiB --workers 1 > /dev/null & ); "
      "( sh -c 'echo $$ > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; exec sleep 0.1' \"$1.orphan\" & ); echo started; "
      "while [ ! -e \"$1\" ]; do sleep 0.02; done; exit 3";
  OciContainer container(run_entry_point(host, script, {go}));
  std::string line;
  ASSERT_TRUE(container.start(&line)) << container.log();
  ASSERT_EQ(line, "started") << container.log();
  ASSERT_TRUE(eventually([&] { return listed_on(host, 0).size() == 1; }, 10000)) << container.log();
  const pid_t leftover = listed_on(host, 0).at(0);
  const pid_t init = container.init_pid();
  ASSERT_GT(init, 0);
  // The orphan is gone from the namespace once PID 1 has reaped it: a PID 1 that reaps nothing
  // keeps it there as a zombie.
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(orphan_file); }, 5000)) << container.log();
  const pid_t orphan = std::stoi(read_text_file(orphan_file));
  EXPECT_TRUE(eventually(
      [&] {
        const auto in_ns = processes_in_pid_namespace_of(init);
        return std::none_of(in_ns.begin(), in_ns.end(), [&](const NamespacedProcess& p) { return p.ns_pid == orphan; });
      },
      5000))
      << "PID 1 left its orphan unreaped";
  EXPECT_TRUE(zombies_in_pid_namespace_of(init).empty()) << "PID 1 left its orphans unreaped";
  std::ofstream(go).close();
  EXPECT_EQ(container.wait_exit(15000), 3) << container.log();
  const auto report = run_report(container.rest_of_output());
  EXPECT_EQ(report["exit_code"], 3) << report.dump(2);
  // No cgroup v2 is mounted in the container (the hybrid host's v1 hierarchies only, read-only):
  // the job is gpureap's descendants.
  EXPECT_EQ(report["ownership"], "subreaper-tree") << report.dump(2);
  EXPECT_EQ(report["main_status"]["exit_code"], 3);
  EXPECT_GE(report["orphans_reaped"].get<int>(), 1) << report.dump(2);
  EXPECT_EQ(report["left_and_ended"].size(), 2u) << report.dump(2);  // the GPU process and its worker
  ASSERT_EQ(report["gpus"].size(), 1u) << report.dump(2);
  EXPECT_TRUE(report["gpus"][0]["verified_free"].get<bool>()) << report.dump(2);
  EXPECT_FALSE(running(leftover));
  EXPECT_TRUE(running(on_host.pid));
  EXPECT_TRUE(listed_on(host, 0).empty());
}

TEST(OciContainers, RunAsEntryPointForwardsTheRuntimesStopSignal) {
  SKIP_WITHOUT_RUNC();
  SimHost host;
  auto on_host = host.start({"--alloc", "1:1GiB"});
  const std::string script =
      "\"$0\" --alloc 0:1GiB --workers 1 > /dev/null & trap 'echo got TERM; exit 7' TERM; echo started; "
      "while :; do sleep 0.02; done";
  OciContainer container(run_entry_point(host, script, {}));
  std::string line;
  ASSERT_TRUE(container.start(&line)) << container.log();
  ASSERT_EQ(line, "started") << container.log();
  ASSERT_TRUE(eventually([&] { return listed_on(host, 0).size() == 1; }, 10000)) << container.log();
  // `docker stop` / `runc kill`: SIGTERM to the container's PID 1, gpureap.
  const auto kill = container.runc({"kill", container.id(), "TERM"});
  ASSERT_EQ(kill.exit_code, 0) << kill.err;
  EXPECT_EQ(container.next_line(), "got TERM") << container.log();
  EXPECT_EQ(container.wait_exit(15000), 7) << container.log();
  const auto report = run_report(container.rest_of_output());
  EXPECT_EQ(report["forwarded_signals"], nlohmann::json::array({"SIGTERM"})) << report.dump(2);
  EXPECT_EQ(report["exit_code"], 7);
  ASSERT_EQ(report["gpus"].size(), 1u) << report.dump(2);
  EXPECT_TRUE(report["gpus"][0]["verified_free"].get<bool>()) << report.dump(2);
  EXPECT_TRUE(listed_on(host, 0).empty());
  EXPECT_TRUE(running(on_host.pid));
}

TEST(OciContainers, ReapCgroupEndsWhatOutlivesTheInitTheRuntimeKilled) {
  SKIP_WITHOUT_RUNC();
  SimHost host;
  auto bystander = host.start({"--alloc", "0:1GiB"});  // same GPU, outside the container
  OciSpec spec;
  spec.id = random_container_id();
  spec.cgroups_path = "/docker/" + spec.id;
  spec.env = host.env();
  spec.gpu_device_dir = host.dev_dir();
  // `docker run --pid=host`, started as containerd's shim starts it: the init's death ends
  // nothing else.
  spec.host_pid_namespace = true;
  spec.detach = true;
  spec.args = {"/bin/sh", "-c", "\"$0\" --alloc 0:2GiB --workers 2 & wait", GPUSIM_CUDA_BINARY};
  OciContainer container(spec);
  std::string line;
  ASSERT_TRUE(container.start(&line)) << container.log();
  const Ready ready = parse_ready(line);
  ASSERT_EQ(ready.workers.size(), 2u) << line;
  const pid_t init = container.init_pid();
  ASSERT_GT(init, 0) << container.log();
  ASSERT_EQ(container.runc({"kill", container.id(), "KILL"}).exit_code, 0);
  ASSERT_TRUE(eventually([&] { return !running(init); })) << "runc kill did not end the init";
  for (pid_t pid : {ready.pid, ready.workers[0], ready.workers[1]}) ASSERT_TRUE(running(pid)) << pid;

  int exit_code = -1;
  const auto report = host.gpureap_json({"reap", "--cgroup", spec.cgroups_path, "--kill-timeout", "2", "--json"},
                                        &exit_code);
  EXPECT_EQ(exit_code, 0) << report.dump(2);
  EXPECT_EQ(report["targets"].size(), 3u) << report.dump(2);
  for (pid_t pid : {ready.pid, ready.workers[0], ready.workers[1]}) EXPECT_FALSE(running(pid)) << pid;
  ASSERT_EQ(report["gpus"].size(), 1u) << report.dump(2);
  EXPECT_TRUE(report["gpus"][0]["verified"].get<bool>()) << report.dump(2);
  EXPECT_TRUE(running(bystander.pid));
  EXPECT_EQ(listed_on(host, 0), std::vector<pid_t>{bystander.pid});
}

}  // namespace
}  // namespace gpureap::test
