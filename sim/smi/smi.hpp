// The simulated nvidia-smi: the few invocations gpureap and its tests make, answered from the
// simulator's state (GPUSIM_STATE_DIR) and, for queries, through the simulated NVML.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpusim::smi {

// nvidia-smi's documented return values (they follow nvmlReturn_t), plus 255 for "other".
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalidArgument = 2;
inline constexpr int kExitNoPermission = 4;
inline constexpr int kExitNotFound = 6;
inline constexpr int kExitDriverNotLoaded = 9;
inline constexpr int kExitLibraryNotFound = 12;
inline constexpr int kExitGpuIsLost = 15;
inline constexpr int kExitOther = 255;

// The exit status nvidia-smi uses for an NVML return code.
int exit_status_for(int nvml_rc);

// What the real tool prints when it cannot talk to the driver (no state, no config).
inline constexpr const char* kDriverNotLoadedMessage =
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.";

enum class Mode { Reset, QueryGpu, QueryComputeApps, ProcessTable };

struct Request {
  Mode mode = Mode::Reset;
  std::optional<std::string> id;    // -i/--id: an index, a UUID or a PCI bus id
  std::vector<std::string> fields;  // --query-*=a,b,c
  bool header = true;               // --format=csv without noheader
  bool units = true;                // ... without nounits
};

// nullopt: an invocation this simulation does not implement.
std::optional<Request> parse_args(const std::vector<std::string>& args);

// Whether -i `id` designates the GPU with this index, UUID and PCI bus id.
bool id_matches(const std::string& id, unsigned index, const std::string& uuid,
                const std::string& bus_id);

// Prints rows as nvidia-smi's CSV: values separated by ", ", an optional header line first.
void print_csv(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
               bool with_header);

int run_reset(const Request& req);
int run_query_gpu(const Request& req);
int run_query_compute_apps(const Request& req);
int run_process_table(const Request& req);

}  // namespace gpusim::smi
