// Exit statuses, documented in docs/exit-codes.md. Scripts depend on them: never renumber.
#pragma once

namespace gpureap::exit_code {

inline constexpr int kOk = 0;
inline constexpr int kInternalError = 1;
inline constexpr int kUsage = 2;
inline constexpr int kNoDriverLibrary = 3;   // libnvidia-ml.so.1 not found; holders still listed
inline constexpr int kDriverInitFailed = 4;  // library found, nvmlInit failed (module, mismatch)
inline constexpr int kGpuError = 5;          // at least one GPU reported an error (lost, ...)

}  // namespace gpureap::exit_code
