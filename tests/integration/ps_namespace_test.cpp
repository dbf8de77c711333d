// Containers for real: PID namespaces (the driver reports host PIDs), gpureap itself inside a
// PID namespace (foreign and mismatch identities), and cgroups named like docker and
// Kubernetes ones.
#include <fcntl.h>
#include <signal.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(Namespaces, ProcessInAPidNamespaceIsListedByHostPidWithItsNamespacePid) {
  if (!running_as_root()) GTEST_SKIP() << "creating a PID namespace needs root";
  SimHost host;
  auto job = host.start({"--pidns", "--alloc", "0:2GiB", "--workers", "1"});
  ASSERT_GT(job.pid, 0) << job.ready_line;
  EXPECT_NE(job.pid, job.ns_pid);
  const auto ps = host.ps_json();
  const auto* p = find_process(ps, job.pid);
  ASSERT_NE(p, nullptr) << ps.dump(2);
  EXPECT_EQ((*p)["identity"], "ok");
  EXPECT_EQ((*p)["namespace_pid"], job.ns_pid);
  ASSERT_EQ((*p)["ns_pids"].size(), 2u);
  EXPECT_EQ((*p)["ns_pids"][0], job.pid);
  EXPECT_EQ((*p)["gpu_memory_bytes"], 2 * GiB);
  const auto* worker = find_holder(ps, job.workers.at(0));
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ((*worker)["role"], "worker");
}

TEST(Namespaces, GpureapInsideAContainerSeesHostPidsAsForeign) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  SpawnOptions options;
  options.env = host.env();
  const auto result = run_command(
      {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", gpureap_binary(), "ps", "--json"}, options);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto ps = nlohmann::json::parse(result.out);
  EXPECT_TRUE(ps["host"]["in_child_pid_namespace"].get<bool>());
  const auto* p = find_process(ps, job.pid);
  ASSERT_NE(p, nullptr) << ps.dump(2);
  EXPECT_EQ((*p)["identity"], "foreign");
  EXPECT_TRUE((*p)["user"].is_null());
  EXPECT_NE((*p)["identity_reason"].get<std::string>().find("host PIDs"), std::string::npos);
  EXPECT_EQ((*p)["gpu_memory_bytes"], 1 * GiB);
}

TEST(Namespaces, SamePidNumberInsideAContainerIsAMismatchNeverTheGpuProcess) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  // Inside a fresh PID namespace, make an unrelated process whose PID equals the GPU
  // process's host PID (ns_last_pid), then run gpureap there.
  const std::string script =
      "echo \"$1\" > /proc/sys/kernel/ns_last_pid && { sleep 30 & } && exec \"$0\" ps --json";
  SpawnOptions options;
  options.env = host.env();
  const auto result = run_command({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "/bin/sh", "-c", script,
                                   gpureap_binary(), std::to_string(job.pid - 1)},
                                  options);
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  const auto ps = nlohmann::json::parse(result.out);
  const auto* p = find_process(ps, job.pid);
  ASSERT_NE(p, nullptr) << ps.dump(2);
  EXPECT_EQ((*p)["identity"], "mismatch") << p->dump(2);
  EXPECT_NE((*p)["identity_reason"].get<std::string>().find("holds no descriptor"), std::string::npos);
}

// A real cgroup directory for the duration of a test.
class CgroupDir {
 public:
  explicit CgroupDir(std::string path) : path_(std::move(path)) {
    run_command({"/bin/mkdir", "-p", path_});
  }
  ~CgroupDir() {
    // Remove the leaf and the parents we made, deepest first, once the processes are gone.
    for (std::string p = path_; p.size() > root_.size() && p.rfind(root_, 0) == 0; p = p.substr(0, p.rfind('/'))) {
      for (int i = 0; i < 50 && rmdir(p.c_str()) != 0 && errno == EBUSY; ++i) usleep(20000);
    }
  }
  bool ok() const { return access((path_ + "/cgroup.procs").c_str(), W_OK) == 0; }
  bool add(pid_t pid) const {
    std::ofstream procs(path_ + "/cgroup.procs");
    procs << pid << std::flush;
    return static_cast<bool>(procs);
  }
  void set_root(std::string root) { root_ = std::move(root); }

 private:
  std::string path_;
  std::string root_ = "/sys/fs/cgroup/";
};

// A writable cgroup hierarchy: a v1 controller or the v2 tree, whichever the host has.
std::string cgroup_root(bool v2) {
  std::ifstream mounts("/proc/self/mounts");
  std::string device, dir, type, opts;
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    fields >> device >> dir >> type >> opts;
    if (v2 && type == "cgroup2") return dir;
    if (!v2 && type == "cgroup" && opts.find("pids") != std::string::npos) return dir;
  }
  return {};
}

const std::string kDockerId = "4f2a9c1b7d3e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4";

TEST(Containers, DockerCgroupNamesTheContainer) {
  if (!running_as_root()) GTEST_SKIP() << "creating cgroups needs root";
  // Docker's systemd driver on cgroup v2, else its cgroupfs driver on v1.
  std::string root = cgroup_root(true);
  std::string path = root.empty() ? "" : root + "/system.slice/docker-" + kDockerId + ".scope";
  if (root.empty() || [&] { CgroupDir probe(path); probe.set_root(root + "/"); return !probe.ok(); }()) {
    root = cgroup_root(false);
    path = root.empty() ? "" : root + "/docker/" + kDockerId;
  }
  if (root.empty()) GTEST_SKIP() << "no writable cgroup hierarchy on this host";
  CgroupDir cgroup(path);
  cgroup.set_root(root + "/");
  if (!cgroup.ok()) GTEST_SKIP() << "cannot create " << path;
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  ASSERT_TRUE(cgroup.add(job.pid)) << path;
  const auto ps = host.ps_json();
  const auto* p = find_process(ps, job.pid);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE((*p)["container"].is_object()) << p->dump(2);
  EXPECT_EQ((*p)["container"]["runtime"], "docker");
  EXPECT_EQ((*p)["container"]["id"], kDockerId);
  const auto only = host.ps_json({"--container", kDockerId.substr(0, 12)});
  ASSERT_EQ(only["processes"].size(), 1u);
  EXPECT_EQ(only["processes"][0]["pid"], job.pid);
  EXPECT_EQ(host.gpureap({"ps", "--container", "ffff"}).exit_code, 2) << "no such container: an error, not silence";
  job.kill_all();
}

TEST(Containers, KubernetesPodCgroupNamesThePod) {
  if (!running_as_root()) GTEST_SKIP() << "creating cgroups needs root";
  const std::string root = cgroup_root(false).empty() ? cgroup_root(true) : cgroup_root(false);
  if (root.empty()) GTEST_SKIP() << "no cgroup hierarchy on this host";
  const std::string pod = "0e3c5a4e-8b1f-4c2d-9a6e-1f2e3d4c5b6a";
  const std::string path = root + "/kubepods/burstable/pod" + pod + "/" + kDockerId;
  CgroupDir cgroup(path);
  cgroup.set_root(root + "/");
  if (!cgroup.ok()) GTEST_SKIP() << "cannot create " << path;
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  ASSERT_TRUE(cgroup.add(job.pid));
  ASSERT_TRUE(cgroup.add(job.workers.at(0)));
  const auto ps = host.ps_json();
  const auto* p = find_process(ps, job.pid);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE((*p)["container"].is_object()) << p->dump(2);
  EXPECT_EQ((*p)["container"]["pod_uid"], pod);
  EXPECT_EQ((*p)["container"]["id"], kDockerId);
  const auto* worker = find_holder(ps, job.workers.at(0));
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ((*worker)["container"]["pod_uid"], pod);
  job.kill_all();
}

// A user names a cgroup in their own tree (user@<uid>.service, which systemd delegates to them)
// exactly like a running docker container. Their process is shown as their rootless container,
// not as that container's, and root's --container does not select it. A prefix that begins two
// containers' ids is refused, naming both, and nothing is signalled.
TEST(Containers, AUsersOwnScopeNamedLikeAContainerIsTheirsAndAnAmbiguousPrefixIsRefused) {
  if (!running_as_root()) GTEST_SKIP() << "creating cgroups needs root";
  const passwd* user = test_user();
  if (user == nullptr) GTEST_SKIP() << "no test user";
  const std::string root = cgroup_root(true).empty() ? cgroup_root(false) : cgroup_root(true);
  if (root.empty()) GTEST_SKIP() << "no cgroup hierarchy on this host";
  const std::string uid = std::to_string(user->pw_uid);
  const std::string other_id = kDockerId.substr(0, 8) + "00112233445566778899aabbccddeeff00112233445566778899aabb";
  CgroupDir real(root + "/system.slice/docker-" + kDockerId + ".scope");
  CgroupDir other(root + "/system.slice/docker-" + other_id + ".scope");
  CgroupDir forged(root + "/user.slice/user-" + uid + ".slice/user@" + uid + ".service/app.slice/docker-" + kDockerId + ".scope");
  for (CgroupDir* dir : {&real, &other, &forged}) dir->set_root(root + "/");
  if (!real.ok() || !other.ok() || !forged.ok()) GTEST_SKIP() << "cannot create cgroups under " << root;
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  auto bystander = host.start({"--alloc", "1:1GiB"});
  auto hostile = host.start({"--alloc", "0:512MiB"}, user->pw_uid);
  ASSERT_GT(hostile.pid, 0) << hostile.ready_line;
  ASSERT_TRUE(real.add(job.pid));
  ASSERT_TRUE(other.add(bystander.pid));
  ASSERT_TRUE(forged.add(hostile.pid));

  const auto ps = host.ps_json();
  const auto* p = find_process(ps, hostile.pid);
  ASSERT_NE(p, nullptr) << ps.dump(2);
  ASSERT_TRUE((*p)["container"].is_object()) << p->dump(2);
  EXPECT_EQ((*p)["container"]["rootless_uid"], user->pw_uid) << p->dump(2);
  const auto* j = find_process(ps, job.pid);
  ASSERT_NE(j, nullptr);
  EXPECT_TRUE((*j)["container"]["rootless_uid"].is_null()) << j->dump(2);

  const auto only = host.ps_json({"--container", kDockerId.substr(0, 12)});
  ASSERT_EQ(only["processes"].size(), 1u) << only["processes"].dump(2);
  EXPECT_EQ(only["processes"][0]["pid"], job.pid);

  const auto refused = host.gpureap({"kill", "--container", kDockerId.substr(0, 8), "--yes"});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find(kDockerId.substr(0, 12)), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(other_id.substr(0, 12)), std::string::npos) << refused.err;
  for (pid_t pid : {job.pid, bystander.pid, hostile.pid}) EXPECT_EQ(::kill(pid, 0), 0) << pid << " was signalled";
  job.kill_all();
  bystander.kill_all();
  hostile.kill_all();
}

}  // namespace
}  // namespace gpureap::test
