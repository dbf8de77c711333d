// Our own declarations of the slice of the NVML C ABI that gpureap uses.
// We never include nvml.h: the library is loaded with dlopen and every layout here is
// pinned with static_asserts against the offsets in shared/reference/nvml-facts.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpureap::nvml_abi {

using Return = int;  // nvmlReturn_t is an int-sized enum
using Device = void*;  // nvmlDevice_t: opaque pointer

inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorLibRmVersionMismatch = 18;
inline constexpr Return kErrorUnknown = 999;

inline constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
inline constexpr unsigned kInvalidInstanceId = 0xFFFFFFFFu;

inline constexpr unsigned kDriverVersionBufferSize = 80;
inline constexpr unsigned kNameBufferSize = 96;
inline constexpr unsigned kUuidBufferSize = 96;
inline constexpr unsigned kPciBusIdBufferSize = 32;

inline constexpr int kEnableStateDisabled = 0;
inline constexpr int kEnableStateEnabled = 1;
inline constexpr int kTemperatureGpu = 0;
inline constexpr unsigned kMigEnable = 1;

constexpr unsigned struct_version(std::size_t size, unsigned version) {
  return static_cast<unsigned>(size) | (version << 24);
}

struct PciInfoV3 {
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];
};
static_assert(sizeof(PciInfoV3) == 68);
static_assert(offsetof(PciInfoV3, domain) == 16);
static_assert(offsetof(PciInfoV3, pciSubSystemId) == 32);
static_assert(offsetof(PciInfoV3, busId) == 36);

struct MemoryV1 {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;  // reserved + allocated
};
static_assert(sizeof(MemoryV1) == 24);

struct MemoryV2 {
  unsigned version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;  // allocated only
};
static_assert(sizeof(MemoryV2) == 40);
static_assert(offsetof(MemoryV2, total) == 8);
static_assert(offsetof(MemoryV2, reserved) == 16);
static_assert(offsetof(MemoryV2, free) == 24);
static_assert(offsetof(MemoryV2, used) == 32);
inline constexpr unsigned kMemoryV2Version = struct_version(sizeof(MemoryV2), 2);
static_assert(kMemoryV2Version == 0x02000028);

struct Utilization {
  unsigned gpu;
  unsigned memory;
};
static_assert(sizeof(Utilization) == 8);

// The three process-record generations. The library writes at its own stride, so these are
// only ever read at an offset computed from the stride we detected, never as an array.
struct ProcessInfoV1 {
  unsigned pid;
  unsigned long long usedGpuMemory;
};
static_assert(sizeof(ProcessInfoV1) == 16);
static_assert(offsetof(ProcessInfoV1, usedGpuMemory) == 8);

struct ProcessInfoV2 {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
};
static_assert(sizeof(ProcessInfoV2) == 24);
static_assert(offsetof(ProcessInfoV2, gpuInstanceId) == 16);
static_assert(offsetof(ProcessInfoV2, computeInstanceId) == 20);

struct ProcessInfo535 {  // the 32-byte "v3" of drivers 535.43-535.86
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
};
static_assert(sizeof(ProcessInfo535) == 32);
static_assert(offsetof(ProcessInfo535, usedGpuCcProtectedMemory) == 24);

inline constexpr std::size_t kLargestProcessRecord = sizeof(ProcessInfo535);

struct ProcessUtilizationSample {
  unsigned pid;
  unsigned long long timeStamp;  // CPU microseconds since the epoch
  unsigned smUtil;
  unsigned memUtil;
  unsigned encUtil;
  unsigned decUtil;
};
static_assert(sizeof(ProcessUtilizationSample) == 32);
static_assert(offsetof(ProcessUtilizationSample, timeStamp) == 8);
static_assert(offsetof(ProcessUtilizationSample, smUtil) == 16);

// Function pointer types, one per symbol we resolve.
extern "C" {
using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using SystemGetStringFn = Return (*)(char*, unsigned);
using SystemGetCudaDriverVersionFn = Return (*)(int*);
using DeviceGetCountFn = Return (*)(unsigned*);
using DeviceGetHandleByIndexFn = Return (*)(unsigned, Device*);
using DeviceGetStringFn = Return (*)(Device, char*, unsigned);
using DeviceGetPciInfoFn = Return (*)(Device, PciInfoV3*);
using DeviceGetUintFn = Return (*)(Device, unsigned*);
using DeviceGetIntEnumFn = Return (*)(Device, int*);
using DeviceGetMemoryInfoFn = Return (*)(Device, MemoryV1*);
using DeviceGetMemoryInfoV2Fn = Return (*)(Device, MemoryV2*);
using DeviceGetUtilizationRatesFn = Return (*)(Device, Utilization*);
using DeviceGetTemperatureFn = Return (*)(Device, int, unsigned*);
using DeviceGetRunningProcessesFn = Return (*)(Device, unsigned*, void*);
using DeviceGetProcessUtilizationFn = Return (*)(Device, ProcessUtilizationSample*, unsigned*,
                                                 unsigned long long);
using DeviceGetMigModeFn = Return (*)(Device, unsigned*, unsigned*);
using DeviceGetMigDeviceHandleByIndexFn = Return (*)(Device, unsigned, Device*);
using DeviceGetConfComputeMemSizeInfoFn = Return (*)(Device, void*);
using DeviceGetRunningProcessDetailListFn = Return (*)(Device, void*);
}

}  // namespace gpureap::nvml_abi
