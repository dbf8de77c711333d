// How the simulated program lives and ends: signal policy and the idle loop.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "cuda/options.hpp"

namespace gpusim::cuda {

// Call before creating anything: blocks the termination signals (SIGTERM, SIGINT, SIGHUP) that
// the policy handles and SIGCHLD, so none is lost before the idle loop starts waiting; with
// `ignore` the termination signals are ignored instead. Handlers are installed even for
// waited-for signals: as PID 1 of a namespace a process without a handler never sees them.
void install_signal_policy(TermPolicy on_sigterm);

// Idles until a termination signal (per policy) or --exit-after; reaps the listed children
// (workers) when they die, and nothing else (a --zombie-child stays a zombie), leaving in
// `children` those not reaped. Returns the exit status.
// Dies of `sig` for real (default action, unblocked), so a parent sees a signal death.
[[noreturn]] void die_of_signal(int sig);

// CLOCK_MONOTONIC in milliseconds.
std::int64_t monotonic_ms();

int idle_until_done(TermPolicy on_sigterm, std::optional<std::uint64_t> exit_after_ms, std::vector<pid_t>& children);

}  // namespace gpusim::cuda
