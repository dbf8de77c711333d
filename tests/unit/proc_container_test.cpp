// parse_cgroup on /proc/<pid>/cgroup files of each container runtime and cgroup driver.
#include <gtest/gtest.h>

#include <fstream>
#include <ostream>
#include <sstream>

#include "proc/proc_parse.hpp"

namespace gpureap {
namespace {

constexpr const char* kDockerId = "3f1c1a2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";
constexpr const char* kCriId = "9e8d7c6b5a49382716f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0f9";
constexpr const char* kPodUid = "1f3e4c2a-5b6d-4e7f-8a9b-0c1d2e3f4a5b";
// Read from a container runc 1.1.5 ran with cgroupsPath /docker/<id> on a hybrid v1/v2 host.
constexpr const char* kRuncDockerId = "e36ee3aefe48056d806822cd2b936bc9b8c1ab476879a3fb9fd73346da5003b6";

std::optional<ContainerRef> parse_fixture(const std::string& name) {
  std::ifstream in(std::string(GPUREAP_FIXTURE_DIR) + "/proc/cgroup/" + name + ".cgroup");
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_cgroup(text.str());
}

struct Expected {
  const char* fixture;
  const char* runtime;
  const char* id;
  const char* pod_uid;
};

void PrintTo(const Expected& expected, std::ostream* out) { *out << expected.fixture; }

class ProcContainerTest : public testing::TestWithParam<Expected> {};

TEST_P(ProcContainerTest, RecognisesContainer) {
  const Expected& e = GetParam();
  const auto ref = parse_fixture(e.fixture);
  ASSERT_TRUE(ref) << e.fixture;
  EXPECT_EQ(ref->runtime, e.runtime);
  EXPECT_EQ(ref->id, e.id);
  EXPECT_EQ(ref->pod_uid, e.pod_uid);
  EXPECT_FALSE(ref->cgroup_path.empty());
  EXPECT_EQ(ref->cgroup_path.front(), '/');
}

INSTANTIATE_TEST_SUITE_P(
    Runtimes, ProcContainerTest,
    testing::Values(
        Expected{"docker_cgroupfs_v1", "docker", kDockerId, ""},
        Expected{"docker_systemd_v2", "docker", kDockerId, ""},
        Expected{"hybrid_docker_systemd", "docker", kDockerId, ""},
        Expected{"runc_hybrid_docker_cgroupfs", "docker", kRuncDockerId, ""},
        Expected{"containerd_cri_systemd", "containerd", kCriId, kPodUid},
        Expected{"crio_systemd", "cri-o", kCriId, kPodUid},
        Expected{"crio_cgroupfs", "cri-o", kCriId, kPodUid},
        Expected{"podman_systemd", "podman", kDockerId, ""},
        Expected{"podman_rootless", "podman", kDockerId, ""},
        Expected{"podman_cgroupfs_v1", "podman", kDockerId, ""},
        Expected{"podman_payload", "podman", kDockerId, ""},
        // cgroupfs driver: the bare id does not tell the runtime.
        Expected{"kubepods_cgroupfs_v1", "kubernetes", kCriId, kPodUid},
        Expected{"kubepods_cgroupfs_guaranteed", "kubernetes", kCriId, kPodUid},
        Expected{"kubepods_systemd_docker", "docker", kCriId, kPodUid},
        Expected{"kubepods_pod_only", "kubernetes", "", kPodUid},
        // cri-o's conmon is not in the container, but it is in the pod.
        Expected{"crio_conmon", "kubernetes", "", kPodUid},
        // A kind node is a docker container; the pod's container inside it wins.
        Expected{"kind_systemd", "containerd", kCriId, kPodUid},
        Expected{"kind_cgroupfs_v1", "kubernetes", kCriId, kPodUid}),
    [](const testing::TestParamInfo<Expected>& param_info) {
      return std::string(param_info.param.fixture);
    });

TEST(ProcContainer, HostProcessesAndRuntimeHelpersAreNotContainers) {
  // runc_default_hybrid: runc's own /<id> below its caller's cgroups, read from a container
  // runc ran without a cgroupsPath: a name any program can give a cgroup.
  for (const char* name : {"host_user_v2", "host_service_v2", "host_v1", "host_cgroupns_root",
                           "podman_conmon", "runc_default_hybrid"}) {
    EXPECT_FALSE(parse_fixture(name)) << name;
  }
}

TEST(ProcContainer, CgroupPathIsTheMatchedLinesPath) {
  const auto ref = parse_fixture("hybrid_docker_systemd");
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->cgroup_path, std::string("/system.slice/docker-") + kDockerId + ".scope");
  const auto v1 = parse_fixture("docker_cgroupfs_v1");
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->cgroup_path, std::string("/docker/") + kDockerId);
}

TEST(ProcContainer, RejectsLookalikes) {
  for (const char* text : {
           "0::/system.slice/docker.service\n",
           "0::/system.slice/docker-compose@app.service\n",
           "0::/docker/notanid\n",
           "0::/docker/3F1C1A2B4D5E6F708192A3B4C5D6E7F8091A2B3C4D5E6F708192A3B4C5D6E7F8\n",
           "0::/pod1f3e4c2a-5b6d-4e7f-8a9b-0c1d2e3f4a5b/abc\n",  // "pod" outside kubepods
           "0::/kubepods/burstable/podxyz/\n",
           "0::/system.slice/docker-abc.scope\n",  // too short to be an id
           "garbage without colons\n",
           "1:cpu\n",
           "",
       }) {
    EXPECT_FALSE(parse_cgroup(text)) << text;
  }
}

// Below user@<uid>.service the user names the cgroups (systemd delegates that tree): a runtime's
// name there is the user's word. Such a container is that user's rootless one, and it satisfies
// neither root's --container nor any watch policy (no selector) for the same id; the runtime's
// own container of that id does.
TEST(ProcContainer, AScopeInAUsersOwnTreeIsThatUsersRootlessContainer) {
  const auto rootless = parse_fixture("podman_rootless");
  ASSERT_TRUE(rootless);
  EXPECT_EQ(rootless->rootless_uid, std::optional<uid_t>(1000));
  const auto forged = parse_cgroup(std::string("0::/user.slice/user-1001.slice/user@1001.service/app.slice/docker-") +
                                   kDockerId + ".scope\n");
  ASSERT_TRUE(forged);
  EXPECT_EQ(forged->runtime, "docker");
  EXPECT_EQ(forged->rootless_uid, std::optional<uid_t>(1001));
  const auto forged_pod = parse_cgroup(std::string("0::/user.slice/user-1001.slice/user@1001.service/kubepods/pod") +
                                       kPodUid + "/" + kCriId + "\n");
  ASSERT_TRUE(forged_pod);
  EXPECT_EQ(forged_pod->rootless_uid, std::optional<uid_t>(1001));
  const auto real = parse_fixture("docker_systemd_v2");
  ASSERT_TRUE(real);
  EXPECT_FALSE(real->rootless_uid);
  // A session scope is root's, not delegated: only user@<uid>.service counts.
  const auto not_delegated = parse_cgroup(std::string("0::/user.slice/user-1001.slice/session-4.scope/docker-") +
                                          kDockerId + ".scope\n");
  ASSERT_TRUE(not_delegated);
  EXPECT_FALSE(not_delegated->rootless_uid);

  const std::string prefix = std::string(kDockerId).substr(0, 12);
  EXPECT_TRUE(container_selected_by(*real, prefix, 0));
  EXPECT_TRUE(container_selected_by(*real, prefix, std::nullopt));
  EXPECT_FALSE(container_selected_by(*forged, prefix, 0)) << "root's --container is not the user's word";
  EXPECT_FALSE(container_selected_by(*forged, prefix, std::nullopt)) << "no policy exclusion by a user's own name";
  EXPECT_FALSE(container_selected_by(*forged, prefix, 1000)) << "another user's";
  EXPECT_TRUE(container_selected_by(*forged, prefix, 1001)) << "its own user selects it";
  EXPECT_FALSE(container_selected_by(*forged_pod, std::string(kPodUid).substr(0, 8), std::nullopt));
  EXPECT_EQ(container_words(*forged), "docker " + prefix + " (rootless, uid 1001)");
  EXPECT_EQ(container_words(*real), "docker " + prefix);
}

}  // namespace
}  // namespace gpureap
