// The simulator's own declaration of the NVML C ABI, written from
// shared/reference/nvml-facts.md and deliberately independent of src/nvml: if the product
// gets a size or offset wrong, the two disagree and the tests notice.
//
// Only what the simulated library implements is declared. Everything is LP64. The entry
// points themselves are extern "C"; the types need no linkage.
#pragma once

#include <cstddef>
#include <cstdint>

// Every NVML enum is an int in the ABI.
typedef int nvmlReturn_t;
typedef int nvmlEnableState_t;
typedef int nvmlComputeMode_t;
typedef int nvmlTemperatureSensors_t;
typedef int nvmlPstates_t;
typedef int nvmlMemoryErrorType_t;
typedef int nvmlEccCounterType_t;
typedef int nvmlDriverModel_t;

// Opaque handles. The simulated library defines nvmlDevice_st; callers only pass it around.
struct nvmlDevice_st;
typedef struct nvmlDevice_st* nvmlDevice_t;

// nvmlReturn_t values (§2).
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
inline constexpr nvmlReturn_t NVML_ERROR_ALREADY_INITIALIZED = 5;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_POWER = 8;
inline constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
inline constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;
inline constexpr nvmlReturn_t NVML_ERROR_IRQ_ISSUE = 11;
inline constexpr nvmlReturn_t NVML_ERROR_LIBRARY_NOT_FOUND = 12;
inline constexpr nvmlReturn_t NVML_ERROR_FUNCTION_NOT_FOUND = 13;
inline constexpr nvmlReturn_t NVML_ERROR_CORRUPTED_INFOROM = 14;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
inline constexpr nvmlReturn_t NVML_ERROR_RESET_REQUIRED = 16;
inline constexpr nvmlReturn_t NVML_ERROR_OPERATING_SYSTEM = 17;
inline constexpr nvmlReturn_t NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18;
inline constexpr nvmlReturn_t NVML_ERROR_IN_USE = 19;
inline constexpr nvmlReturn_t NVML_ERROR_MEMORY = 20;
inline constexpr nvmlReturn_t NVML_ERROR_NO_DATA = 21;
inline constexpr nvmlReturn_t NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_RESOURCES = 23;
inline constexpr nvmlReturn_t NVML_ERROR_FREQ_NOT_SUPPORTED = 24;
inline constexpr nvmlReturn_t NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25;
inline constexpr nvmlReturn_t NVML_ERROR_DEPRECATED = 26;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_READY = 27;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_NOT_FOUND = 28;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_STATE = 29;
inline constexpr nvmlReturn_t NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

inline constexpr int NVML_FEATURE_DISABLED = 0;
inline constexpr int NVML_FEATURE_ENABLED = 1;
inline constexpr int NVML_COMPUTEMODE_DEFAULT = 0;
inline constexpr int NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1;
inline constexpr int NVML_COMPUTEMODE_PROHIBITED = 2;
inline constexpr int NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3;
inline constexpr int NVML_TEMPERATURE_GPU = 0;
// nvmlPstates_t: P0 (maximum performance) .. P15 (minimum), 32 unknown.
inline constexpr int NVML_PSTATE_0 = 0;
inline constexpr int NVML_PSTATE_8 = 8;
inline constexpr int NVML_PSTATE_15 = 15;
inline constexpr int NVML_PSTATE_UNKNOWN = 32;
inline constexpr int NVML_MEMORY_ERROR_TYPE_CORRECTED = 0;
inline constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
inline constexpr int NVML_MEMORY_ERROR_TYPE_COUNT = 2;
inline constexpr int NVML_VOLATILE_ECC = 0;
inline constexpr int NVML_AGGREGATE_ECC = 1;
inline constexpr int NVML_ECC_COUNTER_TYPE_COUNT = 2;
inline constexpr int NVML_DRIVER_WDDM = 0;
inline constexpr int NVML_DRIVER_WDM = 1;
inline constexpr int NVML_DRIVER_MCDM = 2;
inline constexpr unsigned NVML_DEVICE_MIG_DISABLE = 0;
inline constexpr unsigned NVML_DEVICE_MIG_ENABLE = 1;
inline constexpr unsigned NVML_INIT_FLAG_NO_GPUS = 1;
inline constexpr unsigned NVML_INIT_FLAG_NO_ATTACH = 2;
inline constexpr unsigned NVML_INIT_FLAG_FORCE_INIT = 4;
inline constexpr unsigned NVML_PROCESS_MODE_COMPUTE = 0;
inline constexpr unsigned NVML_PROCESS_MODE_GRAPHICS = 1;
inline constexpr unsigned NVML_PROCESS_MODE_MPS = 2;

// Buffer sizes, NUL included (§1).
inline constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;

// NVML_VALUE_NOT_AVAILABLE is (-1) in the header; in unsigned long long fields it reads all ones.
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE_ULL = ~0ULL;
inline constexpr unsigned NVML_INVALID_INSTANCE_ID = 0xFFFFFFFFu;

// nvmlPciInfo_t as written by nvmlDeviceGetPciInfo_v3 (68 bytes).
typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

// The pre-415 layout that nvmlDeviceGetPciInfo_v2 still writes (52 bytes). Its first 36 bytes
// coincide with nvmlPciInfo_t, which is why busIdLegacy exists at offset 0 in the new one.
typedef struct {
  char busId[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  unsigned int reserved0;
  unsigned int reserved1;
  unsigned int reserved2;
  unsigned int reserved3;
} nvmlPciInfo_v2_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;  // reserved + allocated
} nvmlMemory_t;

typedef struct {
  unsigned int version;  // nvmlMemory_v2 below
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;  // allocated only
} nvmlMemory_v2_t;

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

// The 32-byte record: "_v3" of 535.43–535.86 and of some later drivers, and the element of
// nvmlDeviceGetRunningProcessDetailList.
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessDetail_v1_t;

typedef struct {
  unsigned int version;  // nvmlProcessDetailList_v1 below
  unsigned int mode;     // NVML_PROCESS_MODE_*
  unsigned int numProcArrayEntries;
  nvmlProcessDetail_v1_t* procArray;
} nvmlProcessDetailList_v1_t;

typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU timestamp, Unix-epoch microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct {
  unsigned long long protectedMemSizeKib;
  unsigned long long unprotectedMemSizeKib;
} nvmlConfComputeMemSizeInfo_t;

// NVML_STRUCT_VERSION(T, v) = sizeof(T) | v << 24.
constexpr unsigned nvml_struct_version(std::size_t size, unsigned v) {
  return static_cast<unsigned>(size) | (v << 24);
}
inline constexpr unsigned nvmlMemory_v2 = nvml_struct_version(sizeof(nvmlMemory_v2_t), 2);
inline constexpr unsigned nvmlProcessDetailList_v1 =
    nvml_struct_version(sizeof(nvmlProcessDetailList_v1_t), 1);

// The layouts the facts give; a failure here is a bug in this header, not in the product.
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(offsetof(nvmlPciInfo_t, domain) == 16);
static_assert(offsetof(nvmlPciInfo_t, bus) == 20);
static_assert(offsetof(nvmlPciInfo_t, device) == 24);
static_assert(offsetof(nvmlPciInfo_t, pciDeviceId) == 28);
static_assert(offsetof(nvmlPciInfo_t, pciSubSystemId) == 32);
static_assert(offsetof(nvmlPciInfo_t, busId) == 36);
static_assert(sizeof(nvmlPciInfo_v2_t) == 52);
static_assert(offsetof(nvmlPciInfo_v2_t, pciSubSystemId) == offsetof(nvmlPciInfo_t, pciSubSystemId));
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlMemory_v2_t) == 40);
static_assert(offsetof(nvmlMemory_v2_t, total) == 8);
static_assert(offsetof(nvmlMemory_v2_t, reserved) == 16);
static_assert(offsetof(nvmlMemory_v2_t, free) == 24);
static_assert(offsetof(nvmlMemory_v2_t, used) == 32);
static_assert(nvmlMemory_v2 == 0x02000028u);
static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16);
static_assert(offsetof(nvmlProcessInfo_v1_t, usedGpuMemory) == 8);
static_assert(sizeof(nvmlProcessInfo_v2_t) == 24);
static_assert(offsetof(nvmlProcessInfo_v2_t, gpuInstanceId) == 16);
static_assert(offsetof(nvmlProcessInfo_v2_t, computeInstanceId) == 20);
static_assert(sizeof(nvmlProcessDetail_v1_t) == 32);
static_assert(offsetof(nvmlProcessDetail_v1_t, usedGpuCcProtectedMemory) == 24);
static_assert(sizeof(nvmlProcessDetailList_v1_t) == 24);
static_assert(offsetof(nvmlProcessDetailList_v1_t, procArray) == 16);
static_assert(nvmlProcessDetailList_v1 == 0x01000018u);
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32);
static_assert(offsetof(nvmlProcessUtilizationSample_t, timeStamp) == 8);
static_assert(offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16);
static_assert(sizeof(nvmlConfComputeMemSizeInfo_t) == 16);
