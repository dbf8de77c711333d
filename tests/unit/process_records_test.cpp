// The process-record stride logic against fake driver functions that write 16, 24 and 32-byte
// records, including one whose exported symbols mislead the rule (nvitop #181).
#include "nvml/process_records.hpp"

#include <cstring>

#include <gtest/gtest.h>

namespace gpureap {
namespace {

struct FakeList {
  std::size_t stride = 24;
  std::vector<std::pair<unsigned, unsigned long long>> processes;
  int calls = 0;
  int grow_on_call = -1;  // a process appears between the sizing call and the read
};
FakeList g_fake;

int fake_list(nvml_abi::Device, unsigned* count, void* buffer) {
  ++g_fake.calls;
  if (g_fake.calls == g_fake.grow_on_call) g_fake.processes.push_back({4242, 1ull << 20});
  if (count == nullptr) return nvml_abi::kErrorInvalidArgument;
  const auto needed = static_cast<unsigned>(g_fake.processes.size());
  if (*count == 0 && buffer == nullptr) {
    if (needed == 0) return nvml_abi::kSuccess;
    *count = needed;
    return nvml_abi::kErrorInsufficientSize;
  }
  if (*count < needed) {
    *count = needed;
    return nvml_abi::kErrorInsufficientSize;
  }
  auto* out = static_cast<unsigned char*>(buffer);
  for (unsigned i = 0; i < needed; ++i) {
    unsigned char record[32];
    std::memset(record, 0, sizeof(record));
    std::memcpy(record, &g_fake.processes[i].first, 4);
    std::memcpy(record + 8, &g_fake.processes[i].second, 8);
    const unsigned invalid = nvml_abi::kInvalidInstanceId;
    std::memcpy(record + 16, &invalid, 4);
    std::memcpy(record + 20, &invalid, 4);
    std::memcpy(out + i * g_fake.stride, record, g_fake.stride);
  }
  *count = needed;
  return nvml_abi::kSuccess;
}

void reset(std::size_t stride, std::vector<std::pair<unsigned, unsigned long long>> processes) {
  g_fake = FakeList{};
  g_fake.stride = stride;
  g_fake.processes = std::move(processes);
}

TEST(ExpectedRecordStride, FollowsTheDriverGenerations) {
  EXPECT_EQ(expected_record_stride(1, false, false), 16u);
  EXPECT_EQ(expected_record_stride(2, true, true), 24u);
  EXPECT_EQ(expected_record_stride(3, true, false), 32u);  // 535.43-535.86
  EXPECT_EQ(expected_record_stride(3, true, true), 24u);   // >= 535.104
  EXPECT_EQ(expected_record_stride(3, false, false), 24u);
}

TEST(ReadProcessList, DecodesEachStrideWhenTheRuleIsRight) {
  for (std::size_t stride : {16u, 24u, 32u}) {
    reset(stride, {{1234, 2ull << 30}, {5678, 512ull << 20}});
    const auto read = read_process_list(fake_list, nullptr, stride);
    ASSERT_EQ(read.code, nvml_abi::kSuccess) << stride;
    ASSERT_EQ(read.records.size(), 2u);
    EXPECT_EQ(read.records[0].pid, 1234u);
    EXPECT_EQ(read.records[0].used_memory, 2ull << 30);
    EXPECT_EQ(read.records[1].pid, 5678u);
    EXPECT_EQ(read.records[1].used_memory, 512ull << 20);
    EXPECT_FALSE(read.records[0].gpu_instance_id.has_value());
    EXPECT_TRUE(read.warning.empty()) << read.warning;
  }
}

TEST(ReadProcessList, MeasuredStrideOverridesAMisleadingRule) {
  // The library writes 32-byte records while its symbols suggest 24: reading at 24 would
  // turn the second PID into garbage. The sentinel probe must catch it.
  reset(32, {{1234, 2ull << 30}, {5678, 512ull << 20}, {91011, 1ull << 30}});
  const auto read = read_process_list(fake_list, nullptr, 24);
  ASSERT_EQ(read.code, nvml_abi::kSuccess);
  EXPECT_EQ(read.stride, 32u);
  ASSERT_EQ(read.records.size(), 3u);
  EXPECT_EQ(read.records[1].pid, 5678u);
  EXPECT_EQ(read.records[2].pid, 91011u);
  EXPECT_EQ(read.records[2].used_memory, 1ull << 30);
  EXPECT_NE(read.warning.find("32-byte"), std::string::npos) << read.warning;
}

TEST(ReadProcessList, NarrowerRecordsThanExpectedAreReadAtTheirStride) {
  reset(16, {{77, 100}, {88, 200}});
  const auto read = read_process_list(fake_list, nullptr, 24);
  EXPECT_EQ(read.stride, 16u);
  ASSERT_EQ(read.records.size(), 2u);
  EXPECT_EQ(read.records[1].pid, 88u);
  EXPECT_EQ(read.records[1].used_memory, 200u);
}

TEST(ReadProcessList, NoProcessesIsOneCall) {
  reset(24, {});
  const auto read = read_process_list(fake_list, nullptr, 24);
  EXPECT_EQ(read.code, nvml_abi::kSuccess);
  EXPECT_TRUE(read.records.empty());
  EXPECT_EQ(g_fake.calls, 1);
}

TEST(ReadProcessList, AnExpectedCountSkipsTheSizingCallWhileItFits) {
  reset(24, {{11, 100}, {22, 200}});
  auto read = read_process_list(fake_list, nullptr, 24, 2);
  ASSERT_EQ(read.code, nvml_abi::kSuccess);
  EXPECT_EQ(read.records.size(), 2u);
  EXPECT_EQ(g_fake.calls, 1);
  // Far more processes than the buffer sized from the hint: sized again, all of them read.
  reset(24, {});
  for (unsigned pid = 1; pid <= 40; ++pid) g_fake.processes.push_back({pid, 1});
  read = read_process_list(fake_list, nullptr, 24, 2);
  ASSERT_EQ(read.code, nvml_abi::kSuccess);
  EXPECT_EQ(read.records.size(), 40u);
  EXPECT_EQ(g_fake.calls, 2);
  // None left: one call, no records.
  reset(24, {});
  read = read_process_list(fake_list, nullptr, 24, 3);
  EXPECT_EQ(read.code, nvml_abi::kSuccess);
  EXPECT_TRUE(read.records.empty());
  EXPECT_EQ(g_fake.calls, 1);
}

TEST(ReadProcessList, ProcessAppearingBetweenCallsIsIncluded) {
  reset(24, {{1, 10}});
  g_fake.grow_on_call = 2;
  const auto read = read_process_list(fake_list, nullptr, 24);
  ASSERT_EQ(read.code, nvml_abi::kSuccess);
  EXPECT_EQ(read.records.size(), 2u);
}

TEST(ReadProcessList, NotAvailableMemoryIsUnknownNotHuge) {
  reset(24, {{1234, nvml_abi::kValueNotAvailable}});
  const auto read = read_process_list(fake_list, nullptr, 24);
  ASSERT_EQ(read.records.size(), 1u);
  EXPECT_FALSE(read.records[0].used_memory.has_value());
}

// Found by fuzz/process_records_fuzz: a garbage count from the sizing call sized the buffer
// (2n+5 records of 32 bytes: 64 GiB for n = 2^30), filling memory until the process died.
int absurd_count(nvml_abi::Device, unsigned* count, void*) {
  *count = 1u << 30;
  return nvml_abi::kErrorInsufficientSize;
}

TEST(ReadProcessList, AbsurdCountIsAnErrorNotAHugeBuffer) {
  const auto read = read_process_list(absurd_count, nullptr, 24);
  EXPECT_NE(read.code, nvml_abi::kSuccess);
  EXPECT_TRUE(read.records.empty());
  EXPECT_NE(read.warning.find("1073741824 processes"), std::string::npos) << read.warning;
}

// Found by fuzz/process_records_fuzz: a driver claiming more records than the room it was
// given (up to twice as many) had our 0xAA fill decoded as processes with PID 2863311530.
int overclaiming_count(nvml_abi::Device, unsigned* count, void* buffer) {
  if (buffer == nullptr) {
    *count = 1;
    return nvml_abi::kErrorInsufficientSize;
  }
  const unsigned pid = 4242;
  std::memcpy(buffer, &pid, sizeof pid);
  *count *= 2;
  return nvml_abi::kSuccess;
}

TEST(ReadProcessList, MoreRecordsThanTheBufferHeldIsAnError) {
  const auto read = read_process_list(overclaiming_count, nullptr, 16);
  EXPECT_NE(read.code, nvml_abi::kSuccess);
  EXPECT_TRUE(read.records.empty());
  EXPECT_NE(read.warning.find("14 process records in a buffer for 7"), std::string::npos)
      << read.warning;
}

TEST(MeasuredRecordStride, CannotTellWithoutRecords) {
  std::vector<std::byte> buffer(64, std::byte{kStrideProbeFill});
  EXPECT_EQ(measured_record_stride(buffer, 0), 0u);
  EXPECT_EQ(measured_record_stride(buffer, 1), 0u);  // nothing written: no exact fit
}

// Found by fuzz/process_records_fuzz: 16 * count wrapped around to the bytes written, so a
// count no buffer could hold "fit exactly".
TEST(MeasuredRecordStride, AHugeCountNeverFits) {
  std::vector<std::byte> buffer(64, std::byte{kStrideProbeFill});
  buffer[31] = std::byte{1};  // 32 bytes written
  EXPECT_EQ(measured_record_stride(buffer, 2), 16u);
  EXPECT_EQ(measured_record_stride(buffer, (std::size_t{1} << 60) + 2), 0u);
}

TEST(ProcessRecordsPlausible, RejectsZeroPidsAndWildInstanceIds) {
  EXPECT_TRUE(process_records_plausible({{1, 1, std::nullopt, std::nullopt}}));
  EXPECT_FALSE(process_records_plausible({{0, 1, std::nullopt, std::nullopt}}));
  EXPECT_FALSE(process_records_plausible({{5, 1, 0xAAAAAAAAu, 0}}));
}

}  // namespace
}  // namespace gpureap
