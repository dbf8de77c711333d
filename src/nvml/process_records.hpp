// Reading the driver's per-GPU process lists safely.
//
// The library writes records at its own stride (16, 24 or 32 bytes depending on the driver
// generation), whatever the caller believes. A wrong guess scrambles PIDs and memory values
// (nvitop #75, #181; go-nvml #21). We therefore (1) guess from the exported symbols,
// (2) always hand over a buffer big enough for the largest record, pre-filled with a sentinel,
// (3) measure how far the library wrote, and (4) sanity-check the decoded records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nvml/nvml_abi.hpp"

namespace gpureap {

struct ProcessRecord {
  unsigned pid = 0;
  std::optional<std::uint64_t> used_memory;  // nullopt for NVML_VALUE_NOT_AVAILABLE
  std::optional<unsigned> gpu_instance_id;   // nullopt when MIG is off (0xFFFFFFFF) or v1 records
  std::optional<unsigned> compute_instance_id;
};

inline constexpr unsigned char kStrideProbeFill = 0xAA;

// nvitop's rule: _v3 → 32 bytes when ConfComputeMemSizeInfo exists and
// RunningProcessDetailList does not (drivers 535.43–535.86), else 24; _v2 → 24; plain → 16.
std::size_t expected_record_stride(int symbol_version, bool has_conf_compute_mem_size_info,
                                   bool has_running_process_detail_list);

// The stride the library really used: the bytes it wrote over a kStrideProbeFill-filled
// buffer divided by the record count. 0 when it cannot be told (count 0, or no exact fit).
std::size_t measured_record_stride(std::span<const std::byte> buffer, std::size_t count);

std::vector<ProcessRecord> decode_process_records(std::span<const std::byte> buffer,
                                                  std::size_t count, std::size_t stride);

// PIDs non-zero and below the kernel's PID limit; instance ids unset or small.
bool process_records_plausible(const std::vector<ProcessRecord>& records);

struct ProcessListRead {
  int code = nvml_abi::kSuccess;          // the final NVML return code
  std::vector<ProcessRecord> records;
  std::size_t stride = 0;                 // stride used to decode
  std::string warning;                    // set when the measured stride overrode the rule
};

// The two-call protocol: size with (count=0, NULL), allocate 2n+5 records of the largest
// stride, retry on INSUFFICIENT_SIZE as processes appear. With `expected_count` (the processes
// a previous reading found on this list; 0: none known) the buffer is sized from it and the
// sizing call is skipped: one call per list while the count stays within 2n+5 (watch's looks).
ProcessListRead read_process_list(nvml_abi::DeviceGetRunningProcessesFn fn, nvml_abi::Device device,
                                  std::size_t expected_stride, unsigned expected_count = 0);

}  // namespace gpureap
