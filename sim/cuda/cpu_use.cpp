#include "cuda/cpu_use.hpp"

#include <time.h>

#include <thread>

namespace gpusim::cuda {
namespace {

double thread_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Spins until this thread has used `ms` of CPU (time spent descheduled does not count).
void spin_for_cpu_ms(double ms) {
  const double until = thread_cpu_ms() + ms;
  volatile unsigned long sink = 0;
  while (thread_cpu_ms() < until) {
    for (int i = 0; i < 1000; ++i) sink = sink + 1;
  }
}

}  // namespace

void start_cpu_use(unsigned percent) {
  if (percent == 0) return;
  std::thread([percent] {
    for (;;) {
      spin_for_cpu_ms(percent);
      const timespec rest{0, static_cast<long>(100 - percent) * 1000000L};
      ::nanosleep(&rest, nullptr);
    }
  }).detach();
}

}  // namespace gpusim::cuda
