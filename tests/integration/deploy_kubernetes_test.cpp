// deploy/kubernetes/gpureap-exporter.yaml, without a cluster: what the DaemonSet needs to work
// is read from the file (host PID namespace, the host's /dev read-only where GPUREAP_DEV_DIR
// points, probes and annotations on the port it listens on, resources, a locked-down security
// context), and its container's arguments are run by the real `gpureap export` with the
// file's environment, in a network namespace of the test's own so that its fixed port clashes
// with nothing: its probes and Prometheus's scrape are then asked of it as the kubelet and
// Prometheus would.
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <gtest/gtest.h>

#include "export_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

const std::string kManifest = std::string(GPUREAP_DEPLOY_DIR) + "/kubernetes/gpureap-exporter.yaml";

struct Manifest {
  YAML::Node daemonset, service;
};

Manifest read_manifest() {
  Manifest m;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(kManifest)) {
    const std::string kind = doc["kind"].as<std::string>("");
    if (kind == "DaemonSet") m.daemonset = doc;
    if (kind == "Service") m.service = doc;
  }
  return m;
}

YAML::Node only_container(const Manifest& m) {
  const YAML::Node containers = m.daemonset["spec"]["template"]["spec"]["containers"];
  EXPECT_TRUE(containers.IsSequence() && containers.size() == 1) << "one container, gpureap";
  return containers.IsSequence() && containers.size() > 0 ? containers[0] : YAML::Node();
}

std::vector<std::string> args_of(const YAML::Node& container) {
  std::vector<std::string> args;
  for (const auto& a : container["args"]) args.push_back(a.as<std::string>());
  return args;
}

// The value after `option` ("--listen X" or "--listen=X"), or "".
std::string option_value(const std::vector<std::string>& args, const std::string& option) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == option && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(option + "=", 0) == 0) return args[i].substr(option.size() + 1);
  }
  return "";
}

int port_of(const std::string& address) {
  const auto colon = address.rfind(':');
  return colon == std::string::npos ? 0 : std::atoi(address.c_str() + colon + 1);
}

// A probe's or a Service's port: a number, or the name of one of the container's ports.
int resolve_port(const YAML::Node& port, const YAML::Node& container) {
  if (!port) return 0;
  const std::string text = port.as<std::string>();
  if (!text.empty() && std::all_of(text.begin(), text.end(), ::isdigit)) return std::stoi(text);
  for (const auto& p : container["ports"]) {
    if (p["name"].as<std::string>("") == text) return p["containerPort"].as<int>();
  }
  return 0;
}

std::string env_value(const YAML::Node& container, const std::string& name) {
  for (const auto& e : container["env"]) {
    if (e["name"].as<std::string>("") == name) return e["value"].as<std::string>("");
  }
  return "";
}

int container_port(const YAML::Node& container) {
  const YAML::Node ports = container["ports"];
  EXPECT_TRUE(ports.IsSequence() && ports.size() == 1) << "one port, the metrics";
  return ports.IsSequence() && ports.size() > 0 ? ports[0]["containerPort"].as<int>(0) : 0;
}

std::string file_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(DeployKubernetes, TheDaemonSetHasWhatTheExporterNeedsAndNothingMore) {
  const Manifest m = read_manifest();
  ASSERT_TRUE(m.daemonset) << kManifest << ": no DaemonSet";
  ASSERT_TRUE(m.service) << kManifest << ": no Service";
  const YAML::Node pod = m.daemonset["spec"]["template"]["spec"];
  const YAML::Node c = only_container(m);
  // The driver reports host PIDs: only in the host's PID namespace is /proc the host's.
  EXPECT_TRUE(pod["hostPID"].as<bool>(false)) << "hostPID";
  EXPECT_FALSE(pod["hostNetwork"].as<bool>(false)) << "0.0.0.0 must be the pod's own address, not the node's";
  EXPECT_FALSE(pod["automountServiceAccountToken"].as<bool>(true)) << "it talks to no Kubernetes API";

  const std::vector<std::string> args = args_of(c);
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(args[0], "export");
  const int port = container_port(c);
  EXPECT_GT(port, 0);
  EXPECT_EQ(port_of(option_value(args, "--listen")), port) << "--listen and the containerPort differ";

  // The host's /dev, read-only, where GPUREAP_DEV_DIR points.
  std::string dev_volume;
  for (const auto& v : pod["volumes"]) {
    if (v["hostPath"]["path"].as<std::string>("") == "/dev") dev_volume = v["name"].as<std::string>();
  }
  ASSERT_FALSE(dev_volume.empty()) << "no hostPath volume of /dev";
  bool mounted = false;
  for (const auto& mount : c["volumeMounts"]) {
    EXPECT_TRUE(mount["readOnly"].as<bool>(false)) << mount["mountPath"].as<std::string>("") << " is writable";
    if (mount["name"].as<std::string>("") != dev_volume) continue;
    mounted = true;
    EXPECT_EQ(env_value(c, "GPUREAP_DEV_DIR"), mount["mountPath"].as<std::string>("")) << "GPUREAP_DEV_DIR";
  }
  EXPECT_TRUE(mounted) << "the /dev volume is not mounted";
  EXPECT_EQ(env_value(c, "NVIDIA_VISIBLE_DEVICES"), "all") << "every GPU, without requesting one";
  EXPECT_EQ(env_value(c, "NVIDIA_DRIVER_CAPABILITIES"), "utility") << "libnvidia-ml.so.1";
  EXPECT_FALSE(c["resources"]["limits"]["nvidia.com/gpu"]) << "the exporter must not take a GPU from the scheduler";

  for (const char* probe : {"livenessProbe", "readinessProbe"}) {
    EXPECT_EQ(c[probe]["httpGet"]["path"].as<std::string>(""), "/healthz") << probe;
    EXPECT_EQ(resolve_port(c[probe]["httpGet"]["port"], c), port) << probe;
    EXPECT_NE(c[probe]["httpGet"]["scheme"].as<std::string>("HTTP"), "HTTPS") << probe << ": the exporter serves http here";
  }
  // Prometheus finds the pods by their annotations, and the Service's.
  for (const YAML::Node& annotations : {m.daemonset["spec"]["template"]["metadata"]["annotations"],
                                        m.service["metadata"]["annotations"]}) {
    EXPECT_EQ(annotations["prometheus.io/scrape"].as<std::string>(""), "true");
    EXPECT_EQ(annotations["prometheus.io/port"].as<std::string>(""), std::to_string(port));
    EXPECT_EQ(annotations["prometheus.io/path"].as<std::string>("/metrics"), "/metrics");
  }
  const YAML::Node service_port = m.service["spec"]["ports"][0];
  EXPECT_EQ(service_port["port"].as<int>(0), port);
  EXPECT_EQ(resolve_port(service_port["targetPort"], c), port);
  const YAML::Node labels = m.daemonset["spec"]["template"]["metadata"]["labels"];
  for (const auto& selector : {m.service["spec"]["selector"], m.daemonset["spec"]["selector"]["matchLabels"]}) {
    for (const auto& kv : selector) EXPECT_EQ(labels[kv.first.as<std::string>()].as<std::string>(""), kv.second.as<std::string>());
  }
  EXPECT_EQ(m.service["metadata"]["namespace"].as<std::string>(""), m.daemonset["metadata"]["namespace"].as<std::string>(""));

  // Resources, and a security context that grants reading only: root for other users'
  // /proc/<pid>, the capabilities to read their descriptors, no CAP_KILL.
  EXPECT_TRUE(c["resources"]["requests"]["cpu"] && c["resources"]["requests"]["memory"]) << "requests";
  EXPECT_TRUE(c["resources"]["limits"]["memory"]) << "a memory limit";
  const YAML::Node security = c["securityContext"];
  ASSERT_TRUE(security) << "securityContext";
  EXPECT_EQ(security["runAsUser"].as<int>(-1), 0);
  EXPECT_FALSE(security["privileged"].as<bool>(true));
  EXPECT_FALSE(security["allowPrivilegeEscalation"].as<bool>(true));
  EXPECT_TRUE(security["readOnlyRootFilesystem"].as<bool>(false));
  std::set<std::string> dropped, added;
  for (const auto& cap : security["capabilities"]["drop"]) dropped.insert(cap.as<std::string>());
  for (const auto& cap : security["capabilities"]["add"]) added.insert(cap.as<std::string>());
  EXPECT_EQ(dropped, std::set<std::string>{"ALL"});
  for (const char* needed : {"SYS_PTRACE", "DAC_READ_SEARCH"}) EXPECT_EQ(added.count(needed), 1u) << needed;
  for (const char* never : {"KILL", "SYS_ADMIN", "NET_ADMIN"}) EXPECT_EQ(added.count(never), 0u) << never;
}

TEST(DeployKubernetes, ThePrometheusScrapeConfigsUseTheDaemonSetsLabelNamespaceAndPort) {
  const Manifest m = read_manifest();
  ASSERT_TRUE(m.daemonset);
  const int port = container_port(only_container(m));
  // The kubernetes_sd job in deploy/kubernetes/README.md.
  const std::string readme = file_text(std::string(GPUREAP_DEPLOY_DIR) + "/kubernetes/README.md");
  const auto start = readme.find("```yaml\n- job_name: gpureap\n");
  ASSERT_NE(start, std::string::npos) << "the README's scrape job";
  const auto body = start + 8;
  const YAML::Node job = YAML::Load(readme.substr(body, readme.find("```", body) - body))[0];
  EXPECT_EQ(job["kubernetes_sd_configs"][0]["role"].as<std::string>(""), "pod");
  EXPECT_EQ(job["kubernetes_sd_configs"][0]["namespaces"]["names"][0].as<std::string>(""),
            m.daemonset["metadata"]["namespace"].as<std::string>());
  bool kept = false;
  for (const auto& relabel : job["relabel_configs"]) {
    if (relabel["action"].as<std::string>("") != "keep") continue;
    kept = true;
    EXPECT_EQ(relabel["source_labels"][0].as<std::string>(""), "__meta_kubernetes_pod_label_app_kubernetes_io_name");
    EXPECT_EQ(relabel["regex"].as<std::string>(""),
              m.daemonset["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>(""));
  }
  EXPECT_TRUE(kept) << "the job keeps nothing but the exporter's pods";
  // deploy/prometheus's static targets scrape the same port.
  const YAML::Node prometheus = YAML::LoadFile(std::string(GPUREAP_DEPLOY_DIR) + "/prometheus/prometheus.yml");
  for (const auto& scrape : prometheus["scrape_configs"]) {
    if (scrape["job_name"].as<std::string>("") != "gpureap") continue;
    for (const auto& target : scrape["static_configs"][0]["targets"]) EXPECT_EQ(port_of(target.as<std::string>()), port);
  }
}

// This thread (only: a network namespace is per thread) in a network namespace of its own,
// its loopback up; false when the kernel refuses (not root, no user namespaces).
bool own_network_namespace(std::string& why) {
  if (unshare(CLONE_NEWNET) != 0) {
    why = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
    return false;
  }
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  bool up = fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &request) == 0;
  request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP);
  up = up && ioctl(fd, SIOCSIFFLAGS, &request) == 0;
  if (!up) why = std::string("loopback up: ") + std::strerror(errno);
  if (fd >= 0) close(fd);
  return up;
}

TEST(DeployKubernetes, TheContainersArgumentsServeTheProbesAndTheScrapeOnItsPort) {
  const Manifest m = read_manifest();
  ASSERT_TRUE(m.daemonset);
  const YAML::Node c = only_container(m);
  std::vector<std::string> args = args_of(c);
  ASSERT_FALSE(args.empty());
  ASSERT_EQ(args[0], "export");
  args.erase(args.begin());
  const int port = container_port(c);
  const std::string probe_path = c["livenessProbe"]["httpGet"]["path"].as<std::string>("");
  const std::string scrape_path =
      m.daemonset["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"].as<std::string>("/metrics");
  SimHost host;  // GPUREAP_DEV_DIR: the simulated host's /dev, as the manifest's is the node's
  const auto holder = host.start({"--alloc", "0:1GiB"});
  std::string skip;
  // The kubelet and Prometheus reach the pod's address; here, the namespace's loopback.
  std::thread pod([&] {
    if (!own_network_namespace(skip)) return;
    ExportServer server(host, args, /*add_listen=*/false);
    ASSERT_TRUE(server.serving()) << "gpureap export " << testing::PrintToString(args) << " refused the manifest's "
                                  << "arguments:\n" << server.stderr_text();
    EXPECT_EQ(server.port(), port);
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(5, 0);
    const auto health = client.Get(probe_path);
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
    const auto metrics = client.Get(scrape_path);
    ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
    EXPECT_EQ(metrics->status, 200);
    const Scrape s = parse_exposition(metrics->body);
    EXPECT_EQ(s.value("gpureap_gpu_memory_used_bytes", {{"gpu", "0"}}), 1.0 * GiB) << metrics->body;
    EXPECT_EQ(server.stop(), 0) << server.stderr_text();
  });
  pod.join();
  if (!skip.empty()) GTEST_SKIP() << "no network namespace of the test's own for the manifest's fixed port: " << skip;
}

}  // namespace
}  // namespace gpureap::test
