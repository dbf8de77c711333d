// parse_cgroup: which container (and Kubernetes pod) a process runs in, from the cgroup
// paths in /proc/<pid>/cgroup. The same layouts dcgm-exporter and the runtimes produce:
//
//   docker, cgroupfs driver          /docker/<64hex>
//   docker, systemd driver           /system.slice/docker-<64hex>.scope
//   containerd (CRI), systemd        .../cri-containerd-<id>.scope
//   cri-o                            .../crio-<id>.scope (systemd), .../crio-<id> (cgroupfs)
//   podman                           .../libpod-<id>.scope, /libpod_parent/libpod-<id>,
//                                    .../<unit>.service/libpod-payload-<id> (--cgroups=split,
//                                    the Quadlet default)
//   Kubernetes, cgroupfs driver      /kubepods[/<qos>]/pod<uid-with-dashes>/<id>
//   Kubernetes, systemd driver       /kubepods.slice/kubepods-<qos>.slice/
//                                      kubepods-<qos>-pod<uid_with_underscores>.slice/<scope>
//
// Decision for Kubernetes: `runtime` names the container runtime when the path shows it
// ("containerd" for cri-containerd-, "cri-o" for crio-, "docker" for docker-), and `pod_uid`
// carries the pod (dashes restored). The cgroupfs driver names the container directory by the
// bare id, which does not tell the runtime: there runtime is "kubernetes". A process directly
// in a pod cgroup (no container level) gives runtime "kubernetes", id "" and the pod UID.
//
// Paths nest (docker-in-docker, kind nodes): the innermost container wins, since that is the
// one the process runs in. Below a user's own manager (.../user@<uid>.service/..., rootless
// podman and docker) the user names the cgroups: such a container is recorded as rootless, with
// that uid, and never stands for the runtime's container of the same id. conmon's own cgroups (crio-conmon-, libpod-conmon-) are not
// containers: they give at most the pod they sit in.
#include <algorithm>
#include <cstdint>
#include <string>

#include "proc/parse_util.hpp"
#include "proc/proc_parse.hpp"

namespace gpureap {
namespace {

constexpr std::size_t kFullIdLength = 64;

bool is_container_id(std::string_view text) {
  return text.size() >= 12 && text.size() <= kFullIdLength && procfs::all_lower_hex(text);
}

bool is_full_id(std::string_view text) {
  return text.size() == kFullIdLength && procfs::all_lower_hex(text);
}

// Pod UIDs are UUIDs (36 chars) or, for static pods, a 32-hex hash.
bool is_pod_uid(std::string_view text) {
  if (text.size() < 32 || text.size() > 36) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return procfs::is_lower_hex(c) || c == '-'; });
}

// "<prefix><id><suffix>" → id, or "" when `component` does not have that shape.
std::string_view strip(std::string_view component, std::string_view prefix,
                       std::string_view suffix) {
  if (!component.starts_with(prefix)) return {};
  component.remove_prefix(prefix.size());
  if (!suffix.empty()) {
    if (!component.ends_with(suffix)) return {};
    component.remove_suffix(suffix.size());
  }
  return component;
}

struct RuntimeScope {
  std::string_view prefix;
  const char* runtime;
};

// Container cgroups named by a runtime prefix; ".scope" (systemd) is optional.
constexpr RuntimeScope kScopes[] = {
    {"docker-", "docker"},
    {"cri-containerd-", "containerd"},
    {"crio-", "cri-o"},
    {"libpod-payload-", "podman"},
    {"libpod-", "podman"},
};

// The pod UID in a kubepods component, or "" when it is not a pod's cgroup.
//   cgroupfs: "pod<uid-with-dashes>"          (below a "kubepods" component)
//   systemd:  "kubepods-<qos>-pod<uid_with_underscores>.slice", "kubepods-pod<...>.slice",
//             "kubelet-kubepods-<qos>-pod<...>.slice" (kubelet --cgroup-root=/kubelet, as kind)
std::string pod_uid_of(std::string_view component, bool below_kubepods) {
  constexpr std::string_view kKubepods = "kubepods";
  constexpr std::string_view kSlice = ".slice";
  std::string_view uid;
  const std::size_t kubepods = component.find(kKubepods);
  if (kubepods != std::string_view::npos && component.ends_with(kSlice)) {
    const std::size_t at = component.find("-pod", kubepods + kKubepods.size());
    if (at == std::string_view::npos) return {};
    // ".slice" holds no '-', so the match ends before it.
    uid = component.substr(at + 4, component.size() - at - 4 - kSlice.size());
  } else if (below_kubepods && component.starts_with("pod")) {
    uid = component.substr(3);
  } else {
    return {};
  }
  std::string restored(uid);
  std::replace(restored.begin(), restored.end(), '_', '-');
  return is_pod_uid(restored) ? restored : std::string();
}

// "user@1000.service" -> 1000: systemd's per-user manager, whose tree it delegates to the user.
std::optional<uid_t> delegated_uid_of(std::string_view component) {
  constexpr std::string_view kPrefix = "user@", kSuffix = ".service";
  if (!component.starts_with(kPrefix) || !component.ends_with(kSuffix)) return std::nullopt;
  const std::string_view digits = component.substr(kPrefix.size(), component.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.size() > 10) return std::nullopt;
  std::uint64_t uid = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    uid = uid * 10 + static_cast<unsigned>(c - '0');
  }
  if (uid > 0xfffffffeu) return std::nullopt;
  return static_cast<uid_t>(uid);
}

std::optional<ContainerRef> recognise_path(std::string_view path) {
  ContainerRef ref;
  std::optional<uid_t> delegated;  // the uid of a user@<uid>.service above this component
  bool found = false;
  bool below_kubepods = false;
  bool in_pod = false;
  std::string_view previous;
  while (!path.empty()) {
    const std::size_t slash = path.find('/');
    const std::string_view component = path.substr(0, slash);
    path.remove_prefix(slash == std::string_view::npos ? path.size() : slash + 1);
    if (component.empty()) continue;
    if (!delegated) delegated = delegated_uid_of(component);

    if (component.find("kubepods") != std::string_view::npos) below_kubepods = true;
    if (std::string uid = pod_uid_of(component, below_kubepods); !uid.empty()) {
      ref = ContainerRef{"kubernetes", "", std::move(uid), "", delegated};
      in_pod = true;
      found = true;
      previous = component;
      continue;
    }
    bool matched = false;
    for (const RuntimeScope& scope : kScopes) {
      std::string_view id = strip(component, scope.prefix, ".scope");
      if (id.empty()) id = strip(component, scope.prefix, "");
      if (is_container_id(id)) {
        ref.runtime = scope.runtime;
        ref.id.assign(id);
        matched = true;
        break;
      }
    }
    if (!matched && is_full_id(component)) {
      if (previous == "docker") {
        ref.runtime = "docker";
        ref.id.assign(component);
        matched = true;
      } else if (in_pod) {
        ref.runtime = "kubernetes";  // cgroupfs driver: the runtime is not in the path
        ref.id.assign(component);
        matched = true;
      }
    }
    if (matched) {
      // A container below a pod keeps the pod; a new outer container (kind node) does not.
      if (!in_pod) ref.pod_uid.clear();
      ref.rootless_uid = delegated;
      found = true;
    }
    previous = component;
  }
  if (!found) return std::nullopt;
  return ref;
}

}  // namespace

bool container_selected_by(const ContainerRef& container, const std::string& prefix, std::optional<uid_t> selector) {
  if (prefix.empty()) return false;
  if (container.rootless_uid && container.rootless_uid != selector) return false;
  return container.id.starts_with(prefix) || container.pod_uid.starts_with(prefix);
}

std::string container_words(const ContainerRef& container) {
  std::string out = container.runtime;
  if (!container.id.empty()) {
    out += " " + container.id.substr(0, 12);
  } else if (!container.pod_uid.empty()) {
    out += " pod " + container.pod_uid.substr(0, 8);
  }
  if (container.rootless_uid) out += " (rootless, uid " + std::to_string(*container.rootless_uid) + ")";
  return out;
}

std::optional<ContainerRef> parse_cgroup(std::string_view text) {
  // Lines are "<hierarchy-id>:<controllers>:<path>" (v1) or "0::<path>" (v2); a hybrid
  // host has both, normally naming the same container. The first recognised line wins.
  while (!text.empty()) {
    const std::string_view line = procfs::take_line(text);
    const std::size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    const std::size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view path = line.substr(second + 1);
    if (std::optional<ContainerRef> ref = recognise_path(path)) {
      ref->cgroup_path.assign(path);
      return ref;
    }
  }
  return std::nullopt;
}

}  // namespace gpureap
