// The NVML process-record decoder: the driver library decides the record count and stride
// and writes the buffer; none of that may make gpureap read or write outside what it owns.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "fuzz_check.hpp"
#include "nvml/process_records.hpp"

namespace gpureap {
namespace {

constexpr std::array<std::size_t, 3> kStrides = {16, 24, 32};

// A heap block of exactly `bytes`, so ASan catches any read past its end.
struct ExactBuffer {
  explicit ExactBuffer(std::vector<std::uint8_t> bytes)
      : size(bytes.size()), data(new std::byte[std::max<std::size_t>(size, 1)]) {
    if (size != 0) std::memcpy(data.get(), bytes.data(), size);
  }
  std::span<const std::byte> span() const { return {data.get(), size}; }
  std::size_t size;
  std::unique_ptr<std::byte[]> data;
};

std::size_t pick_stride(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? kStrides[in.ConsumeIntegralInRange<std::size_t>(0, 2)]
                          : in.ConsumeIntegral<std::size_t>();
}

void check_decode(FuzzedDataProvider& in) {
  const std::size_t count = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::size_t>(0, 64)
                                             : in.ConsumeIntegral<std::size_t>();
  const std::size_t stride = pick_stride(in);
  const ExactBuffer buffer(in.ConsumeBytes<std::uint8_t>(in.ConsumeIntegralInRange<std::size_t>(0, 4096)));
  const auto records = decode_process_records(buffer.span(), count, stride);
  FUZZ_CHECK(records.size() <= count);
  if (records.empty()) return;
  FUZZ_CHECK(stride >= 16 && records.size() <= buffer.size / stride);
  for (std::size_t i = 0; i < records.size(); ++i) {  // each record is read at i * stride
    unsigned pid = 0;
    std::memcpy(&pid, buffer.data.get() + i * stride, sizeof pid);
    FUZZ_CHECK(records[i].pid == pid);
  }
  process_records_plausible(records);
}

void check_measure(FuzzedDataProvider& in) {
  const std::size_t count = in.ConsumeIntegral<std::size_t>();
  const ExactBuffer buffer(in.ConsumeBytes<std::uint8_t>(in.ConsumeIntegralInRange<std::size_t>(0, 4096)));
  const std::size_t stride = measured_record_stride(buffer.span(), count);
  if (stride == 0) return;
  FUZZ_CHECK(std::find(kStrides.begin(), kStrides.end(), stride) != kStrides.end());
  FUZZ_CHECK(count <= buffer.size / stride);
}

// A driver function scripted by the input: any return code, any count, records of any known
// stride, but never more bytes than the capacity it was given (*count records of 32 bytes).
FuzzedDataProvider* g_script = nullptr;
std::size_t g_largest_capacity = 0;

nvml_abi::Return scripted_driver(nvml_abi::Device, unsigned* count, void* buffer) {
  FuzzedDataProvider& in = *g_script;
  constexpr std::array<nvml_abi::Return, 4> kCodes = {
      nvml_abi::kSuccess, nvml_abi::kErrorInsufficientSize, nvml_abi::kErrorGpuIsLost,
      nvml_abi::kErrorNoPermission};
  const nvml_abi::Return code = kCodes[in.ConsumeIntegralInRange<std::size_t>(0, 3)];
  if (buffer != nullptr) {
    const std::size_t capacity = *count;
    g_largest_capacity = std::max(g_largest_capacity, capacity);
    const std::size_t stride = kStrides[in.ConsumeIntegralInRange<std::size_t>(0, 2)];
    const std::size_t records = in.ConsumeIntegralInRange<std::size_t>(0, std::min<std::size_t>(capacity, 64));
    const auto bytes = in.ConsumeBytes<std::uint8_t>(records * stride);
    if (!bytes.empty()) std::memcpy(buffer, bytes.data(), bytes.size());
  }
  // What it claims need not match what it wrote, nor fit what it was given.
  *count = in.ConsumeBool() ? in.ConsumeIntegralInRange<unsigned>(0, 70) : in.ConsumeIntegral<unsigned>();
  return code;
}

void check_read(FuzzedDataProvider& in) {
  g_script = &in;
  g_largest_capacity = 0;
  const std::size_t expected = kStrides[in.ConsumeIntegralInRange<std::size_t>(0, 2)];
  const ProcessListRead read = read_process_list(scripted_driver, nullptr, expected);
  g_script = nullptr;
  if (read.code != nvml_abi::kSuccess) return;
  FUZZ_CHECK(std::find(kStrides.begin(), kStrides.end(), read.stride) != kStrides.end());
  FUZZ_CHECK(read.records.size() <= g_largest_capacity);
  if (!process_records_plausible(read.records)) FUZZ_CHECK(!read.warning.empty());
}

}  // namespace
}  // namespace gpureap

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: gpureap::check_decode(in); break;
    case 1: gpureap::check_measure(in); break;
    default: gpureap::check_read(in); break;
  }
  return 0;
}
