// gpusim set --gpu I KEY=VALUE...: change a GPU's state under running clients; the library
// notices the replaced config.json on its next call.
#include <fmt/core.h>

#include <functional>
#include <map>

#include "common/size.hpp"
#include "ctl/commands.hpp"
#include "ctl/ctl_common.hpp"

namespace gpusim::ctl {

namespace {

Result<bool> parse_bool(const std::string& v) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  return Error{"expected 0 or 1"};
}

Result<unsigned> parse_uint(const std::string& v, unsigned long long max) {
  auto n = parse_unsigned(v);
  if (!n || *n > max) return Error{fmt::format("expected an integer 0..{}", max)};
  return static_cast<unsigned>(*n);
}

using Setter = std::function<Status(Gpu&, const std::string&)>;

Setter flag(bool Gpu::*field) {
  return [field](Gpu& g, const std::string& v) -> Status {
    auto b = parse_bool(v);
    if (!b.ok()) return Error{b.error().message};
    g.*field = *b;
    return ok_status();
  };
}

Setter number(unsigned Gpu::*field, unsigned long long max) {
  return [field, max](Gpu& g, const std::string& v) -> Status {
    auto n = parse_uint(v, max);
    if (!n.ok()) return Error{n.error().message};
    g.*field = *n;
    return ok_status();
  };
}

Setter counter(std::uint64_t Gpu::*field) {
  return [field](Gpu& g, const std::string& v) -> Status {
    auto n = parse_unsigned(v);
    if (!n) return Error{"expected a count"};
    g.*field = *n;
    return ok_status();
  };
}

// A number 0..max, or `word` for "none" (stored as -1).
Setter or_none(int Gpu::*field, const char* word, unsigned long long max) {
  return [field, word, max](Gpu& g, const std::string& v) -> Status {
    if (v == word) {
      g.*field = -1;
      return ok_status();
    }
    auto n = parse_uint(v, max);
    if (!n.ok()) return Error{fmt::format("expected {} or an integer 0..{}", word, max)};
    g.*field = static_cast<int>(*n);
    return ok_status();
  };
}

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"lost", flag(&Gpu::lost)},
      {"no_permission", flag(&Gpu::no_permission)},
      {"memory_not_available", flag(&Gpu::memory_not_available)},
      {"persistence", flag(&Gpu::persistence)},
      {"temperature", number(&Gpu::temperature, 200)},
      {"power_mw", number(&Gpu::power_mw, 10000000)},
      {"util_gpu", number(&Gpu::util_gpu, 100)},
      {"util_mem", number(&Gpu::util_mem, 100)},
      {"util_enc", number(&Gpu::util_enc, 100)},
      {"util_dec", number(&Gpu::util_dec, 100)},
      {"power_limit_mw", number(&Gpu::power_limit_mw, 10000000)},
      {"enforced_power_limit_mw", number(&Gpu::enforced_power_limit_mw, 10000000)},
      {"ecc", flag(&Gpu::ecc)},
      {"ecc_corrected", counter(&Gpu::ecc_corrected)},
      {"ecc_uncorrected", counter(&Gpu::ecc_uncorrected)},
      {"display_active", flag(&Gpu::display_active)},
      // The header allows a fan speed above 100 % ("This value may exceed 100% in certain cases").
      {"fan_speed", or_none(&Gpu::fan_speed, "none", 200)},
      {"pstate", or_none(&Gpu::pstate, "auto", 15)},
      {"release_delay_ms",
       [](Gpu& g, const std::string& v) -> Status {
         auto n = parse_unsigned(v);
         if (!n) return Error{"expected milliseconds"};
         g.release_delay_ms = *n;
         return ok_status();
       }},
      {"base_used",
       [](Gpu& g, const std::string& v) -> Status {
         auto n = parse_size(v);
         if (!n.ok()) return Error{n.error().message};
         if (*n > g.memory_total - g.memory_reserved) {
           return Error{"larger than the GPU's usable memory (" +
                        format_size(g.memory_total - g.memory_reserved) + ")"};
         }
         g.base_used = *n;
         return ok_status();
       }},
      {"compute_mode",
       [](Gpu& g, const std::string& v) -> Status {
         auto n = parse_uint(v, 3);
         if (!n.ok()) return Error{"expected 0 (default), 1 (exclusive thread), 2 (prohibited) or 3 (exclusive process)"};
         g.compute_mode = static_cast<int>(*n);
         return ok_status();
       }},
      {"name",
       [](Gpu& g, const std::string& v) -> Status {
         if (v.empty() || v.size() >= 96) return Error{"a name of 1..95 characters"};
         g.name = v;
         return ok_status();
       }},
  };
  return table;
}

std::string known_keys() {
  std::string out;
  for (const auto& [k, _] : setters()) out += (out.empty() ? "" : ", ") + k;
  return out;
}

}  // namespace

int run_set(const Layout& layout, const SetOptions& opts) {
  auto cfg = load_state_config(layout);
  if (!cfg.ok()) return fail(cfg.error().message);
  if (auto st = check_gpu_index(*cfg, opts.gpu); !st.ok()) return fail(st.error().message);
  if (opts.assignments.empty()) return fail("nothing to set: give KEY=VALUE (keys: " + known_keys() + ")");
  Gpu& gpu = cfg->gpus[opts.gpu];
  for (const std::string& a : opts.assignments) {
    auto eq = a.find('=');
    if (eq == std::string::npos) return fail(fmt::format("'{}': expected KEY=VALUE", a));
    std::string key = a.substr(0, eq), value = a.substr(eq + 1);
    auto it = setters().find(key);
    if (it == setters().end()) {
      return fail(fmt::format("unknown key '{}' (keys: {})", key, known_keys()));
    }
    if (auto st = it->second(gpu, value); !st.ok()) {
      return fail(fmt::format("{}={}: {}", key, value, st.error().message));
    }
  }
  if (auto st = store_state_config(layout, *cfg); !st.ok()) return fail(st.error().message);
  return 0;
}

}  // namespace gpusim::ctl
