// The CPU a simulated program uses beside its GPU work: a data loader decoding images while the
// GPU waits is busy to `top` and idle to the driver, which is what watch's idle rule tells apart.
#pragma once

namespace gpusim::cuda {

// Starts a thread that spins `percent` ms of every 100 ms (0: none) until the process ends. It
// inherits the caller's blocked signals, so the termination signals still reach the idle loop.
void start_cpu_use(unsigned percent);

}  // namespace gpusim::cuda
