// Driver health: no library, a library that does not match the loaded kernel module (an
// upgrade without reload), a GPU lost or failing, persistence off, and running in a container
// whose PID namespace hides the driver's processes.
#include <fmt/format.h>

#include <fcntl.h>

#include "text/human_format.hpp"
#include "doctor/doctor.hpp"
#include "doctor/reset_readiness.hpp"
#include "nvml/nvml_abi.hpp"
#include "proc/parse_util.hpp"
#include "proc/proc_io.hpp"

namespace gpureap {
namespace {

// "NVRM version: NVIDIA UNIX ... Kernel Module for x86_64  580.159.04  Release Build ..."
std::string kernel_module_line(const std::string& proc_root) {
  procfs::ReadBuffer buffer(1024);
  const std::string path = proc_root + "/driver/nvidia/version";
  auto text = buffer.read_file_until_at(AT_FDCWD, path.c_str(), "\n", 4096);
  if (!text) return {};
  return std::string(procfs::take_line(*text));
}

const char* const kReloadCommand =
    "systemctl stop nvidia-persistenced; rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia && "
    "modprobe nvidia_uvm";

Finding driver_load_finding(const Snapshot& snapshot) {
  const DriverStatus& d = snapshot.driver;
  const std::string module = kernel_module_line(snapshot.table.options().proc_root);
  Finding f;
  f.severity = Severity::Critical;
  f.evidence["message"] = d.message;
  f.evidence["nvml_code"] = d.nvml_code;
  f.evidence["kernel_module"] = module.empty() ? EvidenceValue(nullptr) : EvidenceValue(module);
  f.evidence["nvidia_hardware"] = d.nvidia_hardware.empty() ? EvidenceValue(nullptr) : EvidenceValue(d.nvidia_hardware);
  if (d.no_nvidia_gpus()) {
    // An AMD- or Intel-only host: nothing NVIDIA's to inspect, and nothing wrong.
    f.id = FindingId::NoDriver;
    f.severity = Severity::Info;
    f.summary = "No NVIDIA GPU here (no /dev/nvidia<N>, no PCI display device of vendor 0x10de, no nvidia module): "
                "the NVIDIA checks are skipped";
    return f;
  }
  if (d.failure == LoadFailure::LibraryNotFound) {
    f.id = FindingId::NoDriver;
    f.details.push_back("This host has NVIDIA GPUs: " + d.nvidia_hardware + ".");
    f.summary = "No NVIDIA driver library (libnvidia-ml.so.1) could be loaded: no GPU can be inspected";
    f.details.push_back(module.empty() ? "No NVIDIA kernel module is loaded either (/proc/driver/nvidia/version is missing)."
                                       : "The kernel module is loaded (" + module + ") but its user-space library is not found.");
    f.details.push_back("Processes holding /dev/nvidia* are still listed by `gpureap ps`.");
    f.remedies.push_back({"ldconfig -p | grep libnvidia-ml", Risk::None,
                          "see whether the library is installed outside the loader's path (then set GPUREAP_NVML_LIBRARY)"});
    f.remedies.push_back({"", Risk::None,
                          "in a container: start it with the NVIDIA Container Toolkit (docker run --gpus all ...)"});
    f.remedies.push_back({"apt install nvidia-driver", Risk::Medium,
                          "install the driver (Debian; other distributions have their own package)"});
    return f;
  }
  if (d.failure == LoadFailure::InitFailed && d.nvml_code == nvml_abi::kErrorLibRmVersionMismatch) {
    f.id = FindingId::DriverVersionMismatch;
    f.summary = "The NVIDIA library and the loaded kernel module have different versions (driver upgraded without reload)";
    f.details.push_back("Kernel module: " + (module.empty() ? std::string("unknown") : module));
    f.details.push_back("Library: " + (d.library_path.empty() ? std::string("libnvidia-ml.so.1") : d.library_path));
    f.details.push_back("No CUDA program can start until the module is reloaded or the machine rebooted.");
    f.remedies.push_back({"gpureap ps", Risk::None, "see which processes still hold the GPUs (all must end before a reload)"});
    f.remedies.push_back({kReloadCommand, Risk::High, "reload the kernel module so that it matches the installed library"});
    f.remedies.push_back({"systemctl reboot", Risk::High, "reboot: loads the new module"});
    return f;
  }
  if (d.failure == LoadFailure::InitFailed && d.nvml_code == nvml_abi::kErrorDriverNotLoaded) {
    f.id = FindingId::DriverNotLoaded;
    f.summary = "The NVIDIA library is installed but the kernel module is not loaded";
    f.remedies.push_back({"dmesg | grep -i nvrm", Risk::None, "look for the reason the module failed to load"});
    f.remedies.push_back({"modprobe nvidia && modprobe nvidia_uvm", Risk::Medium, "load the module"});
    return f;
  }
  f.id = FindingId::DriverInitFailed;
  f.summary = "The NVIDIA driver could not be initialised: " + d.message;
  f.remedies.push_back({"dmesg | grep -i -E 'nvrm|xid'", Risk::None, "look for driver errors in the kernel log"});
  f.remedies.push_back({"systemctl reboot", Risk::High, "reboot when the driver stays unusable"});
  return f;
}

Finding gpu_error_finding(const GpuView& gpu) {
  const NvmlError& error = *gpu.reading.error;
  Finding f;
  f.gpu = gpu.reading.index;
  f.evidence["pci_bus_id"] = gpu.reading.pci_bus_id;
  f.evidence["error"] = Evidence{{"code", error.code}, {"name", error.name()}, {"call", error.call}, {"message", error.message}};
  if (error.code == nvml_abi::kErrorGpuIsLost) {
    f.id = FindingId::GpuLost;
    f.severity = Severity::Critical;
    f.summary = fmt::format("GPU {} is lost (fell off the bus or stopped answering): its memory and processes are unreachable",
                            gpu.reading.index);
    f.details.push_back("Processes using it may be stuck in D state and unkillable until the node is power-cycled.");
    f.remedies.push_back({"dmesg | grep -i xid", Risk::None, "Xid 79 confirms the GPU fell off the bus"});
    f.remedies.push_back({"scontrol update nodename=$(hostname -s) state=drain reason=\"GPU lost\"", Risk::Low,
                          "on a Slurm cluster: keep new jobs off this node"});
    f.remedies.push_back({"systemctl reboot", Risk::High,
                          "a GPU that fell off the bus needs the node rebooted, often power-cycled; a GPU reset cannot help"});
    return f;
  }
  f.id = FindingId::GpuError;
  f.severity = error.code == nvml_abi::kErrorNoPermission ? Severity::Warning : Severity::Critical;
  f.summary = fmt::format("GPU {} could not be read: {} ({})", gpu.reading.index, error.message, error.name());
  f.remedies.push_back({"nvidia-smi -q -i " + gpu_device_id(gpu.reading), Risk::None, "see what the driver says about it"});
  return f;
}

Finding count_error_finding(const NvmlError& error) {
  Finding f;
  f.id = FindingId::DriverError;
  f.severity = Severity::Critical;
  f.summary = "The driver could not count the GPUs: " + error.message;
  f.evidence["error"] = Evidence{{"code", error.code}, {"name", error.name()}};
  f.remedies.push_back({"dmesg | grep -i -E 'nvrm|xid'", Risk::None, "look for driver errors in the kernel log"});
  return f;
}

Finding persistence_off_finding(const GpuView& gpu) {
  Finding f;
  f.id = FindingId::PersistenceOff;
  f.severity = Severity::Info;
  f.gpu = gpu.reading.index;
  f.summary = fmt::format("GPU {}: persistence is off: the driver tears its state down whenever no client is attached",
                          gpu.reading.index);
  f.details.push_back("Every CUDA start then re-initialises the GPU (slower starts; state such as clocks is lost).");
  f.evidence["persistence_mode"] = false;
  f.remedies.push_back({"systemctl enable --now nvidia-persistenced", Risk::Low,
                        "keep the driver state loaded with NVIDIA's daemon"});
  return f;
}

// In a container without the host's PID namespace, the driver's host PIDs mean nothing here.
void check_foreign_in_container(const Snapshot& snapshot, Diagnosis& diagnosis) {
  EvidenceList foreign;
  std::uint64_t bytes = 0;
  for (const auto& p : snapshot.processes) {
    if (p.identity != Identity::Foreign) continue;
    foreign.push_back(Evidence{{"gpu", p.gpu_index}, {"host_pid", p.driver.pid},
                       {"gpu_memory_bytes", EvidenceValue(p.driver.used_memory)}});
    bytes += p.driver.used_memory.value_or(0);
  }
  if (foreign.empty()) return;
  Finding f;
  f.id = FindingId::InContainer;
  f.severity = Severity::Warning;
  f.summary = fmt::format(
      "gpureap runs in a PID namespace (a container without --pid=host): {} driver-listed process(es) using {} "
      "are not visible here",
      foreign.size(), format_bytes(bytes));
  f.details.push_back("The driver reports host PIDs. From here they cannot be matched to processes, and must "
                      "never be signalled: the same number may name an unrelated process in this container.");
  f.details.push_back("Run gpureap on the host (or in a container started with --pid=host) to see and end them.");
  f.evidence["foreign_processes"] = foreign;
  f.remedies.push_back({"gpureap doctor", Risk::None, "on the host: shows the container each process runs in"});
  f.remedies.push_back({"gpureap kill --container <id>", Risk::Medium,
                        "on the host: end the processes of one container (or restart the container)"});
  diagnosis.findings.push_back(std::move(f));
}

// On the host: a listed PID that does not exist, or names a process without the GPU open.
void check_unverifiable_pids(const Snapshot& snapshot, Diagnosis& diagnosis) {
  EvidenceList unknown;
  std::vector<std::string> lines;
  for (const auto& p : snapshot.processes) {
    if (p.identity != Identity::Foreign && p.identity != Identity::Mismatch) continue;
    if (!p.held_by.empty()) continue;  // exited, its memory held by orphans: that finding explains it
    unknown.push_back(Evidence{{"gpu", p.gpu_index}, {"pid", p.driver.pid}, {"identity", identity_name(p.identity)},
                       {"reason", p.identity_reason}});
    lines.push_back(fmt::format("GPU {}: PID {}: {}", p.gpu_index, p.driver.pid, p.identity_reason));
  }
  if (unknown.empty()) return;
  Finding f;
  f.id = FindingId::UnverifiablePids;
  f.severity = Severity::Warning;
  f.summary = fmt::format("The driver lists {} PID(s) that are not GPU processes here: never signal them by number",
                          unknown.size());
  f.details = lines;
  f.details.push_back("Either they exited a moment ago, or the driver reports PIDs of another PID namespace "
                      "(seen with some 560 drivers).");
  f.evidence["processes"] = unknown;
  f.remedies.push_back({"gpureap doctor", Risk::None, "look again: an exited process disappears from the list"});
  diagnosis.findings.push_back(std::move(f));
}

}  // namespace

void check_driver(const Snapshot& snapshot, Diagnosis& diagnosis) {
  if (!snapshot.driver.loaded) {
    diagnosis.findings.push_back(driver_load_finding(snapshot));
    return;
  }
  if (snapshot.driver.count_error) diagnosis.findings.push_back(count_error_finding(*snapshot.driver.count_error));
  for (const auto& gpu : snapshot.gpus) {
    if (gpu.reading.error) {
      diagnosis.findings.push_back(gpu_error_finding(gpu));
      continue;
    }
    if (gpu.reading.persistence_mode == false) diagnosis.findings.push_back(persistence_off_finding(gpu));
  }
  if (snapshot.in_child_pid_namespace) {
    check_foreign_in_container(snapshot, diagnosis);
  } else {
    check_unverifiable_pids(snapshot, diagnosis);
  }
}

}  // namespace gpureap
