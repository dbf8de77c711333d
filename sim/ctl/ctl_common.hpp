// Shared plumbing of the `gpusim` subcommands: locating the state, loading and saving config.
#pragma once

#include <optional>
#include <string>

#include "common/config.hpp"
#include "common/layout.hpp"
#include "common/result.hpp"

namespace gpusim::ctl {

// --state DIR, else GPUSIM_STATE_DIR.
Result<Layout> resolve_state(const std::string& state_opt);

// config.json of an initialised state directory, with a message that says what to run.
Result<Config> load_state_config(const Layout& layout);

// Replaces config.json atomically.
Status store_state_config(const Layout& layout, const Config& config);

// "3" -> 3 for a GPU index that must exist in `config`.
Status check_gpu_index(const Config& config, unsigned gpu);

// Parses unsigned decimal text strictly ("12", not "12x" or "-1").
std::optional<unsigned long long> parse_unsigned(const std::string& text);

// Prints "gpusim: error: <message>" to stderr and returns the exit status for failures.
int fail(const std::string& message);

}  // namespace gpusim::ctl
