#include "nvml/process_records.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

namespace gpureap {
namespace {

constexpr std::array<std::size_t, 3> kKnownStrides = {16, 24, 32};
constexpr unsigned kPidLimit = 4194304;  // PID_MAX_LIMIT on 64-bit kernels
constexpr unsigned kMaxPlausibleInstanceId = 64;
constexpr int kMaxSizingRounds = 8;
// More processes on one GPU than any driver allows; a count above it is garbage (a wrong ABI,
// a broken library) and must not size our buffer (2n+5 records of 32 bytes each).
constexpr unsigned kMaxProcessRecords = 1u << 16;

template <typename T>
T load(std::span<const std::byte> buffer, std::size_t offset) {
  T value{};
  std::memcpy(&value, buffer.data() + offset, sizeof(T));
  return value;
}

std::optional<unsigned> instance_id(unsigned raw) {
  if (raw == nvml_abi::kInvalidInstanceId) return std::nullopt;
  return raw;
}

}  // namespace

std::size_t expected_record_stride(int symbol_version, bool has_conf_compute_mem_size_info,
                                   bool has_running_process_detail_list) {
  if (symbol_version >= 3) {
    return (has_conf_compute_mem_size_info && !has_running_process_detail_list)
               ? sizeof(nvml_abi::ProcessInfo535)
               : sizeof(nvml_abi::ProcessInfoV2);
  }
  if (symbol_version == 2) return sizeof(nvml_abi::ProcessInfoV2);
  return sizeof(nvml_abi::ProcessInfoV1);
}

std::size_t measured_record_stride(std::span<const std::byte> buffer, std::size_t count) {
  if (count == 0) return 0;
  // The last field of every record generation (memory high bytes, instance ids, CC memory)
  // is never 0xAA in practice, so the last byte that differs from the fill ends the data.
  std::size_t written = 0;
  for (std::size_t i = buffer.size(); i > 0; --i) {
    if (buffer[i - 1] != std::byte{kStrideProbeFill}) {
      written = i;
      break;
    }
  }
  for (std::size_t stride : kKnownStrides) {
    // Compared by division: stride * count wraps for a huge count and could match.
    if (written % stride == 0 && written / stride == count) return stride;
  }
  return 0;
}

std::vector<ProcessRecord> decode_process_records(std::span<const std::byte> buffer,
                                                  std::size_t count, std::size_t stride) {
  std::vector<ProcessRecord> records;
  if (stride < sizeof(nvml_abi::ProcessInfoV1)) return records;
  count = std::min(count, buffer.size() / stride);
  records.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t base = i * stride;
    ProcessRecord record;
    record.pid = load<unsigned>(buffer, base + offsetof(nvml_abi::ProcessInfoV1, pid));
    const auto memory =
        load<unsigned long long>(buffer, base + offsetof(nvml_abi::ProcessInfoV1, usedGpuMemory));
    if (memory != nvml_abi::kValueNotAvailable) record.used_memory = memory;
    if (stride >= sizeof(nvml_abi::ProcessInfoV2)) {
      record.gpu_instance_id =
          instance_id(load<unsigned>(buffer, base + offsetof(nvml_abi::ProcessInfoV2, gpuInstanceId)));
      record.compute_instance_id = instance_id(
          load<unsigned>(buffer, base + offsetof(nvml_abi::ProcessInfoV2, computeInstanceId)));
    }
    records.push_back(record);
  }
  return records;
}

bool process_records_plausible(const std::vector<ProcessRecord>& records) {
  return std::all_of(records.begin(), records.end(), [](const ProcessRecord& r) {
    if (r.pid == 0 || r.pid >= kPidLimit) return false;
    if (r.gpu_instance_id && *r.gpu_instance_id > kMaxPlausibleInstanceId) return false;
    if (r.compute_instance_id && *r.compute_instance_id > kMaxPlausibleInstanceId) return false;
    return true;
  });
}

ProcessListRead read_process_list(nvml_abi::DeviceGetRunningProcessesFn fn, nvml_abi::Device device,
                                  std::size_t expected_stride, unsigned expected_count) {
  ProcessListRead result;
  result.stride = expected_stride;
  unsigned count = 0;
  int rc = nvml_abi::kErrorInsufficientSize;
  if (expected_count > 0 && expected_count <= kMaxProcessRecords) {
    count = expected_count;  // sized as last time: no sizing call while it still fits
  } else {
    rc = fn(device, &count, nullptr);
    if (rc == nvml_abi::kSuccess) return result;  // no processes
  }
  std::vector<std::byte> buffer;
  unsigned capacity = 0;  // records the driver was told the buffer holds
  for (int round = 0; round < kMaxSizingRounds && rc == nvml_abi::kErrorInsufficientSize; ++round) {
    if (count > kMaxProcessRecords) {
      result.code = nvml_abi::kErrorUnknown;
      result.warning = fmt::format("driver reported {} processes on one GPU, more than the {} "
                                   "any driver supports; its process list is not read",
                                   count, kMaxProcessRecords);
      return result;
    }
    capacity = 2 * count + 5;  // processes may appear between the calls
    // Room for the largest record generation whatever we expect: a driver that writes
    // wider records than we guessed must never write past our buffer.
    buffer.assign(std::size_t{capacity} * nvml_abi::kLargestProcessRecord, std::byte{kStrideProbeFill});
    count = capacity;
    rc = fn(device, &count, buffer.data());
  }
  result.code = rc;
  if (rc != nvml_abi::kSuccess) return result;
  // More records than it was given room for: the rest would be our fill, decoded as PIDs.
  if (count > capacity) {
    result.code = nvml_abi::kErrorUnknown;
    result.warning = fmt::format("driver reported {} process records in a buffer for {}", count,
                                 capacity);
    return result;
  }

  auto records = decode_process_records(buffer, count, expected_stride);
  const std::size_t measured = measured_record_stride(buffer, count);
  if (measured != 0 && measured != expected_stride) {
    auto remeasured = decode_process_records(buffer, count, measured);
    if (process_records_plausible(remeasured)) {
      result.warning = fmt::format(
          "driver wrote {}-byte process records where its exported symbols suggest {}; using {}",
          measured, expected_stride, measured);
      result.stride = measured;
      result.records = std::move(remeasured);
      return result;
    }
  }
  if (!process_records_plausible(records)) {
    result.warning = fmt::format(
        "process records from the driver look scrambled at a {}-byte stride (measured {}); "
        "PIDs may be wrong",
        expected_stride, measured);
  }
  result.records = std::move(records);
  return result;
}

}  // namespace gpureap
