#include "ctl/ctl_common.hpp"

#include <charconv>
#include <fmt/core.h>

#include "common/file_io.hpp"

namespace gpusim::ctl {

Result<Layout> resolve_state(const std::string& state_opt) {
  if (!state_opt.empty()) return Layout(state_opt);
  if (auto env = state_dir_from_env()) return Layout(*env);
  return Error{"no state directory: pass --state DIR or set GPUSIM_STATE_DIR"};
}

Result<Config> load_state_config(const Layout& layout) {
  ReadResult r = read_file(layout.config());
  if (!r.ok()) {
    if (r.error.missing) {
      return Error{fmt::format("{} is not an initialised simulator state (no config.json); run "
                               "`gpusim --state {} init` first",
                               layout.root(), layout.root())};
    }
    return Error{r.error.message};
  }
  auto cfg = parse_config(r.data);
  if (!cfg.ok()) return Error{layout.config() + ": " + cfg.error().message};
  return cfg;
}

Status store_state_config(const Layout& layout, const Config& config) {
  return save_config(layout.config(), config);
}

Status check_gpu_index(const Config& config, unsigned gpu) {
  if (gpu < config.gpus.size()) return ok_status();
  return Error{fmt::format("no GPU {}: the simulator has {} GPU(s), indices 0..{}", gpu,
                           config.gpus.size(),
                           config.gpus.empty() ? 0 : config.gpus.size() - 1)};
}

std::optional<unsigned long long> parse_unsigned(const std::string& text) {
  unsigned long long v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

int fail(const std::string& message) {
  fmt::print(stderr, "gpusim: error: {}\n", message);
  return 1;
}

}  // namespace gpusim::ctl
