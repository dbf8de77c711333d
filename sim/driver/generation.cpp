#include "driver/generation.hpp"

#if !defined(GPUSIM_GEN_NAME) || !defined(GPUSIM_GEN_DRIVER_VERSION) || \
    !defined(GPUSIM_GEN_NVML_MAJOR) || !defined(GPUSIM_GEN_CUDA_VERSION) ||  \
    !defined(GPUSIM_GEN_V3_STRIDE) || !defined(GPUSIM_GEN_MPS_CLIENTS)
#error "generation.cpp is compiled per driver generation with GPUSIM_GEN_* definitions"
#endif

static_assert(GPUSIM_GEN_V3_STRIDE == 0 || GPUSIM_GEN_V3_STRIDE == 24 || GPUSIM_GEN_V3_STRIDE == 32);

namespace gpusim {

const Generation kGeneration = {GPUSIM_GEN_NAME, GPUSIM_GEN_DRIVER_VERSION, GPUSIM_GEN_NVML_MAJOR,
                                GPUSIM_GEN_CUDA_VERSION, GPUSIM_GEN_V3_STRIDE,
                                GPUSIM_GEN_MPS_CLIENTS != 0};

}  // namespace gpusim
