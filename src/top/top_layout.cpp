#include "top/top_layout.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "top/key_machine.hpp"
#include "text/human_format.hpp"
#include "text/sanitize.hpp"
#include "text/truncate.hpp"

namespace gpureap {
namespace {

// The command column keeps at least this much; narrower screens lose columns first.
constexpr std::size_t kMinCommand = 24;

struct Glyphs {
  const char* used;
  const char* unattributed;
  const char* free;
  const char* cannot;
};
Glyphs glyphs(bool ascii) { return ascii ? Glyphs{"#", "%", ".", "x"} : Glyphs{"█", "▒", "░", "✗"}; }

// One line being built: spans added while they fit, the last one cut to what is left.
class LineBuilder {
 public:
  explicit LineBuilder(std::size_t width) : width_(width) {}
  void add(std::string_view text, Tone tone = Tone::Normal) {
    if (text.empty() || room() == 0) return;
    const std::size_t w = display_width(text);
    std::string fitted = w <= room() ? std::string(text) : truncate_to_width(text, room());
    used_ += display_width(fitted);
    line_.spans.push_back({std::move(fitted), tone});
  }
  // Adds it whole, or not at all.
  bool add_whole(std::string_view text, Tone tone = Tone::Normal) {
    if (display_width(text) > room()) return false;
    add(text, tone);
    return true;
  }
  void add_spans(const std::vector<Span>& spans) {
    for (const auto& s : spans) add(s.text, s.tone);
  }
  std::size_t room() const { return width_ > used_ ? width_ - used_ : 0; }
  FrameLine done(bool highlighted = false) {
    line_.highlighted = highlighted;
    return std::move(line_);
  }

 private:
  std::size_t width_;
  std::size_t used_ = 0;
  FrameLine line_;
};

FrameLine one_span(std::size_t width, std::string_view text, Tone tone) {
  LineBuilder line(width);
  line.add(text, tone);
  return line.done();
}

void add_wrapped(std::vector<FrameLine>& out, std::size_t width, std::string_view text, Tone tone, std::size_t indent) {
  const std::string pad(indent, ' ');
  for (const auto& piece : wrap_to_width(text, width > indent ? width - indent : 1)) {
    out.push_back(one_span(width, pad + piece, tone));
  }
}

// ---- title and notices ---------------------------------------------------------------------

// What changes and what was chosen first: a narrow screen cuts the driver's versions.
std::string title_text(const TopState& state, const LayoutOptions& options) {
  std::string text = "gpureap top";
  const Snapshot* s = state.snapshot.get();
  if (s != nullptr && s->driver.loaded) text += fmt::format(" · {} GPU{}", s->gpus.size(), s->gpus.size() == 1 ? "" : "s");
  if (s != nullptr && !s->drm.devices.empty()) text += fmt::format(" · {} AMD/Intel", s->drm.devices.size());
  if (s != nullptr) text += fmt::format(" · {:%H:%M:%S}", fmt::localtime(std::chrono::system_clock::to_time_t(s->taken_at)));
  text += fmt::format(" · sort: {}", sort_key_name(state.order.sort));
  if (state.order.tree) text += " · tree";
  if (state.order.gpu) text += fmt::format(" · GPU {} only", *state.order.gpu);
  if (!state.order.filter.empty() && state.mode != Mode::Filter) text += " · filter \"" + state.order.filter + "\"";
  text += fmt::format(" · every {:g}s", options.interval_s);
  if (s != nullptr && s->driver.loaded) {
    text += " · driver " + (s->driver.driver_version.empty() ? "?" : sanitize_for_terminal(s->driver.driver_version));
    if (s->driver.cuda_driver_version) text += " · CUDA " + format_cuda_version(*s->driver.cuda_driver_version);
  }
  return text;
}

void notices(const TopState& state, const LayoutOptions& options, std::vector<FrameLine>& out) {
  const std::size_t w = options.width;
  const Snapshot* s = state.snapshot.get();
  if (s == nullptr) {
    out.push_back(one_span(w, "reading the driver and /proc…", Tone::Dim));
    return;
  }
  if (!s->driver.loaded && !s->drm.devices.empty()) {
    out.push_back(one_span(w, "No NVIDIA driver: the AMD and Intel GPUs (DRM) are shown.", Tone::Dim));
  } else if (!s->driver.loaded) {
    LineBuilder line(w);
    line.add("No GPU driver: ", Tone::Bad);
    line.add(sanitize_for_terminal(s->driver.message));
    out.push_back(line.done());
    out.push_back(one_span(w, "Processes holding GPU device files are still listed below.", Tone::Normal));
  } else if (s->driver.count_error) {
    out.push_back(one_span(w, fmt::format("The driver could not count GPUs: {} ({})", s->driver.count_error->name(),
                                          sanitize_for_terminal(s->driver.count_error->message)),
                           Tone::Bad));
  } else if (s->gpus.empty() && s->drm.devices.empty()) {
    out.push_back(one_span(w, "No GPUs reported by the driver.", Tone::Warn));
  }
  if (state.readonly) {
    out.push_back(one_span(w, "read-only (--readonly): nothing can be signalled from this view", Tone::Warn));
  } else if (!state.can_kill_any) {
    out.push_back(one_span(w,
                           fmt::format("not root: rows marked {} are not yours to end (another user's, protected or "
                                       "foreign); sudo gpureap top can end other users' processes",
                                       glyphs(options.ascii).cannot),
                           Tone::Warn));
  }
  if (s->in_child_pid_namespace) {
    out.push_back(one_span(w,
                           "gpureap runs in a PID namespace: the driver's host PIDs do not exist here; run it on "
                           "the host or with --pid=host",
                           Tone::Warn));
  }
  if (s->processes_not_inspected > 0) {
    out.push_back(one_span(w,
                           fmt::format("{} process{} could not be inspected (permission denied): GPU holders "
                                       "among them are not shown",
                                       s->processes_not_inspected, s->processes_not_inspected == 1 ? "" : "es"),
                           Tone::Warn));
  }
}

// ---- GPU headers ---------------------------------------------------------------------------

std::string gpu_error_words(const NvmlError& e) {
  std::string advice = "this GPU cannot be queried right now";
  if (e.code == 15) advice = "the GPU fell off the bus or stopped responding: see dmesg | grep -i xid";
  if (e.code == 4) advice = "no permission to query this GPU: run as root";
  return fmt::format("{} from {}: {}", e.name(), e.call, advice);
}

std::string watts(unsigned mw) { return fmt::format("{:.0f}", static_cast<double>(mw) / 1000.0); }

// Line 1: the GPU, its name and memory, and unattributed memory; then utilization,
// temperature, power, fan, performance state and the history, on line 1 while they fit, else
// on a second line when `second_line` allows one.
std::vector<FrameLine> gpu_header(const TopState& state, const GpuView& gpu, const LayoutOptions& options,
                                  bool second_line) {
  const auto& r = gpu.reading;
  const std::size_t w = options.width;
  std::vector<FrameLine> out;
  LineBuilder line(w);
  line.add(fmt::format("GPU {} ", r.index), Tone::Strong);
  const std::string name = truncate_to_width(sanitize_for_terminal(r.name.empty() ? "?" : r.name), w >= 120 ? 28 : 18);
  line.add(name + " ", Tone::Normal);
  if (r.error) {
    line.add(r.error->code == 15 ? "lost: " : "error: ", Tone::Bad);
    line.add(sanitize_for_terminal(gpu_error_words(*r.error)), Tone::Bad);
    out.push_back(line.done());
    return out;
  }
  const auto& m = gpu.memory;
  const std::size_t cells = w < 100 ? 10 : std::clamp<std::size_t>(w / 5, 10, 30);  // 80 columns: room for the rest
  if (m.total && m.used) {
    line.add("[", Tone::Dim);
    line.add_spans(memory_bar(gpu, cells, options.ascii));
    line.add("] ", Tone::Dim);
    line.add(fmt::format("{}/{}", format_bytes(*m.used), format_bytes(*m.total)));
  } else {
    line.add("memory unknown", Tone::Dim);
  }
  const std::uint64_t tolerance = overhead_tolerance_bytes(r.processes.size());
  if (m.unattributed && *m.unattributed > tolerance) {
    line.add(fmt::format(" {} {} unattributed", glyphs(options.ascii).unattributed, format_bytes(*m.unattributed)),
             Tone::Unattributed);
  }
  std::vector<std::string> extras;
  if (r.util_gpu_percent) extras.push_back(fmt::format("util {}%", *r.util_gpu_percent));
  if (r.temperature_c) extras.push_back(fmt::format("{}°C", *r.temperature_c));
  if (r.power_mw) {
    extras.push_back(r.power_limit_mw ? fmt::format("{}/{} W", watts(*r.power_mw), watts(*r.power_limit_mw))
                                      : fmt::format("{} W", watts(*r.power_mw)));
  }
  if (r.fan_percent) extras.push_back(fmt::format("fan {}%", *r.fan_percent));
  if (r.performance_state) extras.push_back(fmt::format("P{}", *r.performance_state));
  LineBuilder more(w);
  more.add("     ");
  bool overflow = false;
  for (const auto& extra : extras) {
    if (!overflow && line.add_whole("  " + extra)) continue;
    overflow = true;  // the rest keep their order on the second line
    more.add_whole("  " + extra);
  }
  const auto& mem_history = state.history.memory(r.index);
  const auto& util_history = state.history.utilization(r.index);
  auto add_history = [&](LineBuilder& into) {
    const std::size_t n = std::min<std::size_t>(30, (into.room() - 12) / 2);
    into.add("  mem ", Tone::Dim);
    into.add(sparkline(mem_history, n, options.ascii), Tone::Good);
    into.add(" util ", Tone::Dim);
    into.add(sparkline(util_history, n, options.ascii), Tone::Good);
  };
  bool history_shown = mem_history.empty();
  if (!overflow && !history_shown && line.room() >= 30) {
    add_history(line);
    history_shown = true;
  }
  out.push_back(line.done());
  if (second_line && (overflow || !history_shown)) {
    if (!history_shown && more.room() >= 24) add_history(more);
    out.push_back(more.done());
  }
  for (const auto& warning : r.warnings) out.push_back(one_span(w, "  warning: " + sanitize_for_terminal(warning), Tone::Warn));
  return out;
}

// An AMD or Intel GPU (DRM): its label in the GPU column ("D0"), vendor, PCI address, driver,
// and its VRAM as the driver reports it (amdgpu; i915 and xe report none), with the share its
// clients explain. One line, in the NVIDIA header's order.
FrameLine drm_gpu_header(const Snapshot& snapshot, std::size_t index, const LayoutOptions& options) {
  const auto& device = snapshot.drm.devices[index];
  LineBuilder line(options.width);
  line.add(fmt::format("GPU D{} ", index), Tone::Strong);
  line.add(fmt::format("{} {} {} ", drm::gpu_vendor_name(device.vendor), device.pci_address,
                       sanitize_for_terminal(device.driver)));
  if (device.vram_total && device.vram_used && *device.vram_total > 0) {
    const std::size_t w = options.width;
    const std::size_t cells = w < 100 ? 10 : std::clamp<std::size_t>(w / 5, 10, 30);
    const double share = std::min(1.0, static_cast<double>(*device.vram_used) / static_cast<double>(*device.vram_total));
    auto n = static_cast<std::size_t>(std::lround(share * static_cast<double>(cells)));
    if (*device.vram_used > 0 && n == 0) n = 1;
    const Glyphs g = glyphs(options.ascii);
    std::string used, free;
    for (std::size_t i = 0; i < cells; ++i) (i < n ? used : free) += i < n ? g.used : g.free;
    line.add("[", Tone::Dim);
    line.add(used, share >= 0.9 ? Tone::Bad : share >= 0.6 ? Tone::Warn : Tone::Good);
    line.add(free, Tone::Dim);
    line.add("] ", Tone::Dim);
    line.add(fmt::format("{}/{}", format_bytes(*device.vram_used), format_bytes(*device.vram_total)));
  } else {
    line.add("VRAM use not reported by the driver", Tone::Dim);
  }
  if (const auto clients = snapshot.drm.clients.device_memory_of(device.pci_address)) {
    line.add(fmt::format("  clients {}", format_bytes(*clients)), Tone::Dim);
  }
  if (device.xgmi_hive_id) line.add(fmt::format("  XGMI hive {}", *device.xgmi_hive_id), Tone::Dim);
  return line.done();
}

// Everything above the table. Sparklines get lines of their own only when the table keeps at
// least 10 rows and the GPU's line has no room for them.
std::vector<FrameLine> header_lines(const TopState& state, const LayoutOptions& options) {
  std::vector<FrameLine> out;
  out.push_back(one_span(options.width, title_text(state, options), Tone::Strong));
  notices(state, options, out);
  if (state.snapshot == nullptr) return out;
  std::vector<const GpuView*> gpus;
  for (const auto& g : state.snapshot->gpus) {
    if (!state.order.gpu || g.reading.index == *state.order.gpu) gpus.push_back(&g);
  }
  const bool separate = !options.height || *options.height >= out.size() + gpus.size() * 2 + 2 + 10;
  for (const GpuView* g : gpus) {
    for (auto& l : gpu_header(state, *g, options, separate)) out.push_back(std::move(l));
  }
  // AMD and Intel GPUs after NVIDIA's, as ps shows them; hidden while one NVIDIA GPU is chosen.
  if (!state.order.gpu) {
    for (std::size_t i = 0; i < state.snapshot->drm.devices.size(); ++i) {
      out.push_back(drm_gpu_header(*state.snapshot, i, options));
    }
  }
  return out;
}

// ---- the table ------------------------------------------------------------------------------

enum class Col { Mark, Gpu, Pid, LocalPid, User, Container, Type, GpuMem, Sm, Cpu, Host, State, Age };
struct Column {
  Col col;
  const char* title;
  std::size_t width;
  bool right;
  int drop;  // dropped first at 1, never at 0
};
constexpr std::array<Column, 13> kColumns{{
    {Col::Mark, "", 2, false, 0},        {Col::Gpu, "GPU", 3, false, 0},     {Col::Pid, "PID", 7, true, 0},
    {Col::LocalPid, "LPID", 7, true, 3}, {Col::User, "USER", 9, false, 6},   {Col::Container, "CONTAINER", 14, false, 1},
    {Col::Type, "TYPE", 4, false, 4},    {Col::GpuMem, "GPU MEM", 9, true, 0}, {Col::Sm, "SM%", 4, true, 5},
    {Col::Cpu, "CPU%", 5, true, 7},      {Col::Host, "HOST MEM", 8, true, 2}, {Col::State, "S", 1, false, 9},
    {Col::Age, "AGE", 6, true, 8},
}};

// The columns that fit beside a command of kMinCommand, dropped in rank order; the container
// and its PID are left out altogether while no row shown has one.
std::vector<Column> columns_for(const TopState& state, std::size_t width) {
  bool containers = false, local_pids = false;
  for (const auto& d : state.shown) {
    containers = containers || !d.row.container.empty();
    local_pids = local_pids || d.row.local_pid.has_value();
  }
  std::vector<Column> kept;
  for (const auto& c : kColumns) {
    if ((c.col == Col::Container && !containers) || (c.col == Col::LocalPid && !local_pids)) continue;
    kept.push_back(c);
  }
  auto used = [&] {
    std::size_t total = 0;
    for (const auto& c : kept) total += c.width + 1;
    return total;
  };
  for (int rank = 1; rank <= 9 && used() + kMinCommand > width; ++rank) {
    std::erase_if(kept, [rank](const Column& c) { return c.drop == rank; });
  }
  return kept;
}

std::string cell(std::string_view text, const Column& c) {
  std::string fitted = truncate_to_width(text, c.width);
  const std::size_t w = display_width(fitted);
  const std::string pad(c.width > w ? c.width - w : 0, ' ');
  return (c.right ? pad + fitted : fitted + pad) + " ";
}

std::string cpu_text(double percent) {
  return percent >= 100 ? fmt::format("{:.0f}", percent) : fmt::format("{:.1f}", percent);
}

Tone row_tone(const DisplayRow& d) {
  if (d.placeholder) return Tone::Dim;
  switch (d.row.kind) {
    case RowKind::Orphan: return Tone::Bad;
    case RowKind::Foreign: case RowKind::Mismatch: case RowKind::Gone: return Tone::Warn;
    case RowKind::Client: return Tone::Dim;
    default: return Tone::Normal;
  }
}

FrameLine table_row(const TopState& state, const DisplayRow& d, const std::vector<Column>& columns,
                    const LayoutOptions& options, bool highlighted) {
  const TopRow& r = d.row;
  const Tone tone = row_tone(d);
  LineBuilder line(options.width);
  for (const auto& c : columns) {
    switch (c.col) {
      case Col::Mark: {
        const bool tagged = state.tags.count(r.key) > 0 && !d.placeholder;
        line.add(tagged ? "*" : " ", Tone::Strong);
        line.add(!r.can_act && !d.placeholder && !state.readonly ? glyphs(options.ascii).cannot : " ", Tone::Warn);
        line.add(" ");
        break;
      }
      case Col::Gpu:
        line.add(cell(r.gpu ? std::to_string(*r.gpu) : r.drm_gpu ? fmt::format("D{}", *r.drm_gpu) : "-", c), tone);
        break;
      case Col::Pid: line.add(cell(std::to_string(r.pid()), c), tone); break;
      case Col::LocalPid: line.add(cell(r.local_pid ? std::to_string(*r.local_pid) : "-", c), tone); break;
      case Col::User: line.add(cell(r.user.empty() ? "-" : r.user, c), tone); break;
      case Col::Container: line.add(cell(r.container.empty() ? "-" : r.container, c), tone); break;
      case Col::Type: line.add(cell(r.type.empty() ? "-" : r.type, c), tone); break;
      case Col::GpuMem: line.add(cell(r.gpu_memory ? format_bytes(*r.gpu_memory) : "-", c), tone); break;
      case Col::Sm: line.add(cell(r.sm_percent ? std::to_string(*r.sm_percent) : "-", c), tone); break;
      case Col::Cpu: line.add(cell(r.cpu_percent ? cpu_text(*r.cpu_percent) : "-", c), tone); break;
      case Col::Host: line.add(cell(r.host_memory ? format_bytes(*r.host_memory) : "-", c), tone); break;
      case Col::State: line.add(cell(std::string(1, r.state), c), tone); break;
      case Col::Age: line.add(cell(r.age_seconds ? format_duration(*r.age_seconds) : "-", c), tone); break;
    }
  }
  line.add(d.tree_prefix, Tone::Dim);
  if (!r.role.empty()) line.add("[" + r.role + "] ", tone == Tone::Normal ? Tone::Strong : tone);
  line.add(r.command, tone);
  return line.done(highlighted);
}

FrameLine table_heading(const std::vector<Column>& columns, std::size_t width) {
  std::string text;
  for (const auto& c : columns) text += cell(c.title, c);
  return one_span(width, text + "COMMAND", Tone::Dim);
}

// ---- overlays --------------------------------------------------------------------------------

std::vector<FrameLine> confirm_lines(const TopState& state, const LayoutOptions& options, std::size_t area) {
  const std::size_t w = options.width;
  const KillPreview& p = *state.preview;
  std::vector<FrameLine> body;
  body.push_back(one_span(w, "End these processes? The plan, from a fresh look at every process:", Tone::Strong));
  if (!p.signalled.empty()) {
    body.push_back(one_span(w, fmt::format("Will be signalled ({}):", p.signalled.size()),
                            Tone::Strong));
    for (const auto& e : p.signalled) {
      body.push_back(one_span(w, fmt::format("  {:>7}  {}", e.pid, e.who), Tone::Normal));
      add_wrapped(body, w, "why: " + e.why, Tone::Dim, 11);
    }
  }
  if (!p.refused.empty()) {
    body.push_back(one_span(w, fmt::format("Refused: nothing will be sent to them ({}):", p.refused.size()), Tone::Warn));
    for (const auto& e : p.refused) {
      body.push_back(one_span(w, fmt::format("  {:>7}  {}", e.pid, e.who), Tone::Normal));
      add_wrapped(body, w, e.why, Tone::Warn, 11);
    }
  }
  for (const auto& note : p.notes) add_wrapped(body, w, note, Tone::Warn, 2);
  for (const auto& m : p.memory) body.push_back(one_span(w, "  " + m, Tone::Good));
  std::vector<FrameLine> keys;
  if (p.anything_to_signal()) {
    add_wrapped(keys, w,
                fmt::format("Enter or l: {} · t: SIGTERM only · i: SIGINT only · 9: SIGKILL now · Esc: cancel",
                            ladder_words(Ladder::TermThenKill, state.ladder_timeout_s)),
                Tone::Strong, 0);
  } else {
    keys.push_back(one_span(w, "Nothing here can be signalled (see why above). Esc: back", Tone::Bad));
  }
  // The keys stay on screen whatever the plan's length.
  const std::size_t room = area > keys.size() ? area - keys.size() : 0;
  if (body.size() > room) {
    const std::size_t hidden = body.size() - (room > 0 ? room - 1 : 0);
    body.resize(room > 0 ? room - 1 : 0);
    if (room > 0) body.push_back(one_span(w, fmt::format("  … {} more lines (a larger window shows them)", hidden), Tone::Dim));
  }
  for (auto& k : keys) body.push_back(std::move(k));
  return body;
}

Tone severity_tone(Severity s) {
  return s == Severity::Critical ? Tone::Bad : s == Severity::Warning ? Tone::Warn : Tone::Normal;
}

std::vector<FrameLine> doctor_lines(const TopState& state, const LayoutOptions& options, std::size_t area) {
  const std::size_t w = options.width;
  std::vector<FrameLine> out;
  const std::string what = state.doctor_gpu ? fmt::format("GPU {} and the host", *state.doctor_gpu) : "every GPU and the host";
  out.push_back(one_span(w, "Doctor: " + what, Tone::Strong));
  if (!state.doctor) {
    out.push_back(one_span(w, "examining… (memory no process explains is re-measured for a few seconds)", Tone::Dim));
    return out;
  }
  std::vector<FrameLine> body;
  if (state.doctor->findings.empty()) body.push_back(one_span(w, "no findings: healthy", Tone::Good));
  for (const auto& f : state.doctor->findings) {
    add_wrapped(body, w, fmt::format("[{}] {}", severity_name(f.severity), sanitize_for_terminal(f.summary)),
                severity_tone(f.severity), 0);
    for (const auto& d : f.details) add_wrapped(body, w, sanitize_for_terminal(d), Tone::Dim, 4);
    for (const auto& remedy : f.remedies) {
      const std::string command = remedy.command.empty() ? "" : sanitize_for_terminal(remedy.command) + "  ";
      const std::string risk = remedy.risk == Risk::None ? "no risk" : fmt::format("{} risk", risk_name(remedy.risk));
      add_wrapped(body, w, fmt::format("→ {}({}) {}", command, risk, sanitize_for_terminal(remedy.explanation)),
                  Tone::Normal, 4);
    }
  }
  for (const auto& note : state.doctor->notes) add_wrapped(body, w, "note: " + sanitize_for_terminal(note), Tone::Dim, 0);
  const std::size_t room = area > 2 ? area - 2 : 0;
  const std::size_t first = std::min(state.doctor_scroll, body.size() > room ? body.size() - room : 0);
  for (std::size_t i = first; i < body.size() && i < first + room; ++i) out.push_back(std::move(body[i]));
  out.push_back(one_span(w, "↑ ↓ scroll · any other key: back", Tone::Dim));
  return out;
}

// `?`: each key in a column of its own, what it does beside it.
std::vector<FrameLine> help_overlay(const TopState& state, const LayoutOptions& options) {
  constexpr std::size_t kKeys = 12;
  const std::size_t w = options.width;
  std::vector<FrameLine> out;
  out.push_back(one_span(w, "Keys (any key to go back)", Tone::Strong));
  for (const auto& [keys, text] : help_entries(state.ladder_timeout_s)) {
    const auto pieces = wrap_to_width(text, w > kKeys + 2 ? w - kKeys - 2 : 1);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      LineBuilder line(w);
      line.add(pad_to_width(i == 0 ? (options.ascii && keys == "█ ▒ ░" ? "# % ." : keys) : "", kKeys) + "  ", Tone::Strong);
      line.add(pieces[i]);
      out.push_back(line.done());
    }
  }
  return out;
}

// The bottom of the screen: what is being typed, the last outcome (on up to two lines), or the
// keys.
std::vector<FrameLine> status_lines(const TopState& state, const LayoutOptions& options) {
  const std::size_t w = options.width;
  if (state.mode == Mode::Filter) {
    LineBuilder line(w);
    line.add("filter: ", Tone::Strong);
    line.add(state.order.filter + "_");
    line.add("   Enter keeps it · Esc cancels", Tone::Dim);
    return {line.done()};
  }
  if (!state.status.empty()) {
    const Tone tone = state.status_tone == StatusTone::Good  ? Tone::Good
                      : state.status_tone == StatusTone::Bad ? Tone::Bad
                      : state.status_tone == StatusTone::Busy ? Tone::Warn
                                                               : Tone::Normal;
    std::vector<FrameLine> out;
    auto pieces = wrap_to_width(state.status, w);
    if (pieces.size() > 2) {
      pieces[1] = truncate_to_width(pieces[1] + " " + pieces[2], w);
      pieces.resize(2);
    }
    for (const auto& piece : pieces) out.push_back(one_span(w, piece, tone));
    return out;
  }
  LineBuilder line(w);
  if (!state.tags.empty()) line.add(fmt::format("{} tagged · ", state.tags.size()), Tone::Strong);
  line.add(state.readonly ? "read-only · space tag · / filter · t tree · s sort · g GPU · d doctor · ? help · q quit"
                          : "K end · space tag · / filter · t tree · s sort · g GPU · d doctor · ? help · q quit",
           Tone::Dim);
  return {line.done()};
}

}  // namespace

std::vector<Span> memory_bar(const GpuView& gpu, std::size_t cells, bool ascii) {
  const auto& m = gpu.memory;
  const Glyphs g = glyphs(ascii);
  if (!m.total || !m.used || *m.total == 0) return {{std::string(cells, '?'), Tone::Dim}};
  auto cells_for = [&](std::uint64_t bytes) {
    const double share = std::min(1.0, static_cast<double>(bytes) / static_cast<double>(*m.total));
    auto n = static_cast<std::size_t>(std::lround(share * static_cast<double>(cells)));
    if (bytes > 0 && n == 0) n = 1;  // any use at all is visible
    return std::min(n, cells);
  };
  const std::uint64_t tolerance = overhead_tolerance_bytes(gpu.reading.processes.size());
  const std::uint64_t unattributed = m.unattributed && *m.unattributed > tolerance ? *m.unattributed : 0;
  const std::size_t used_cells = cells_for(*m.used);
  const std::size_t unattributed_cells = std::min(cells_for(unattributed), used_cells);
  const std::size_t attributed_cells = used_cells - unattributed_cells;
  const double share = static_cast<double>(*m.used) / static_cast<double>(*m.total);
  const Tone used_tone = share >= 0.9 ? Tone::Bad : share >= 0.6 ? Tone::Warn : Tone::Good;
  auto repeat = [](const char* glyph, std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out += glyph;
    return out;
  };
  std::vector<Span> spans;
  if (attributed_cells) spans.push_back({repeat(g.used, attributed_cells), used_tone});
  if (unattributed_cells) spans.push_back({repeat(g.unattributed, unattributed_cells), Tone::Unattributed});
  if (cells > used_cells) spans.push_back({repeat(g.free, cells - used_cells), Tone::Dim});
  return spans;
}

namespace {

// Above the table or the overlay: the title alone under the help, which needs the room.
std::vector<FrameLine> lines_above(const TopState& state, const LayoutOptions& options) {
  if (state.mode == Mode::Help) return {one_span(options.width, title_text(state, options), Tone::Strong)};
  return header_lines(state, options);
}

}  // namespace

std::size_t table_capacity(const TopState& state, const LayoutOptions& options) {
  if (!options.height) return state.shown.size();
  // The table's heading, and the status line(s).
  const std::size_t fixed = lines_above(state, options).size() + 1 + status_lines(state, options).size();
  return *options.height > fixed ? *options.height - fixed : 0;
}

Frame layout_frame(const TopState& state, const LayoutOptions& options) {
  Frame frame;
  frame.lines = lines_above(state, options);
  const std::size_t w = options.width;
  const bool interactive = options.height.has_value();
  const std::size_t capacity = table_capacity(state, options);
  const std::size_t area = capacity + 1;  // what an overlay may use: the table and its heading
  std::vector<FrameLine> overlay;
  if (state.mode == Mode::Confirm && state.preview) {
    overlay = confirm_lines(state, options, area);
  } else if (state.mode == Mode::Doctor) {
    overlay = doctor_lines(state, options, area);
  } else if (state.mode == Mode::Help) {
    overlay = help_overlay(state, options);
  }
  if (!overlay.empty()) {
    if (overlay.size() > area) overlay.resize(area);
    for (auto& l : overlay) frame.lines.push_back(std::move(l));
  } else {
    const auto columns = columns_for(state, w);
    frame.lines.push_back(table_heading(columns, w));
    if (state.shown.empty() && state.snapshot) {
      frame.lines.push_back(one_span(w,
                                     state.order.filter.empty() && !state.order.gpu
                                         ? "  no GPU process and no holder of a GPU device file"
                                         : "  no row matches (/ changes the filter, g the GPU)",
                                     Tone::Dim));
    }
    const std::size_t first = interactive ? std::min(state.scroll, state.shown.size()) : 0;
    const std::size_t last = std::min(state.shown.size(), first + capacity);
    frame.table_top = static_cast<int>(frame.lines.size());
    frame.first_row = first;
    frame.rows_shown = last - first;
    for (std::size_t i = first; i < last; ++i) {
      frame.lines.push_back(table_row(state, state.shown[i], columns, options, interactive && i == state.cursor));
    }
  }
  if (interactive) {
    auto status = status_lines(state, options);
    const std::size_t above = *options.height > status.size() ? *options.height - status.size() : 0;
    while (frame.lines.size() < above) frame.lines.emplace_back();
    if (frame.lines.size() > above) frame.lines.resize(above);
    for (auto& l : status) frame.lines.push_back(std::move(l));
  }
  return frame;
}

std::string frame_text(const Frame& frame) {
  std::string out;
  for (const auto& line : frame.lines) {
    std::string text;
    for (const auto& span : line.spans) text += span.text;
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  }
  return out;
}

}  // namespace gpureap
