// The driver's process lists as nvidia-smi reads them: through _v2 (24-byte records) where the
// driver has it, else the original 16-byte call. Both layouts are fixed in every generation,
// unlike _v3's (see quirk32).
#pragma once

#include <vector>

#include "smi/nvml_session.hpp"

namespace gpusim::smi {

enum class ProcessList { Compute, Graphics, Mps };

// NVML_ERROR_FUNCTION_NOT_FOUND when the driver has no such list at all.
nvmlReturn_t read_process_list(const NvmlSession& s, nvmlDevice_t dev, ProcessList list,
                               std::vector<nvmlProcessInfo_v2_t>* out);

}  // namespace gpusim::smi
