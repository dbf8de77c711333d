#include "cli/ps/ps_table.hpp"

#include <algorithm>
#include <ctime>
#include <set>

#include <unistd.h>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/ps/ps_drm.hpp"
#include "text/human_format.hpp"
#include "text/truncate.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

constexpr int kBarWidth = 30;
constexpr int kNarrowestBar = 10;

// The process table's columns that give way, widest first, when a limited width would leave
// the command fewer than OutputWidth::kMinimumColumns: CONTAINER, then SM, CPU% and AGE.
// --wide and a pipe show them all.
struct ProcessColumns {
  bool container = true, sm = true, cpu = true, age = true;

  static ProcessColumns fitting(const OutputWidth& width) {
    ProcessColumns c;
    if (!width.columns()) return c;
    // "  PID USER TYPE GPU MEM IDENTITY S " and the optional columns, with their spaces.
    std::size_t used = 2 + 8 + 10 + 5 + 11 + 11 + 3 + 7 + 6 + 5 + 17;
    const std::size_t limit = *width.columns() > OutputWidth::kMinimumColumns ? *width.columns() - OutputWidth::kMinimumColumns : 0;
    for (auto [shown, columns] : {std::pair{&c.container, 17}, {&c.sm, 5}, {&c.cpu, 6}, {&c.age, 7}}) {
      if (used <= limit) break;
      *shown = false;
      used -= static_cast<std::size_t>(columns);
    }
    return c;
  }
  std::vector<std::string> left_out() const {
    std::vector<std::string> names;
    if (!container) names.push_back("CONTAINER");
    if (!sm) names.push_back("SM");
    if (!cpu) names.push_back("CPU%");
    if (!age) names.push_back("AGE");
    return names;
  }
  std::string header() const {
    return fmt::format("      PID USER      TYPE    GPU MEM IDENTITY   S {}{}{}{}COMMAND\n", age ? "    AGE " : "",
                       cpu ? " CPU% " : "", sm ? "  SM " : "", container ? "CONTAINER        " : "");
  }
  // The optional cells of a row, each with the space after it.
  std::string cells(const std::string& age_cell, const std::string& cpu_cell, const std::string& sm_cell,
                    const std::string& container_cell) const {
    return fmt::format("{}{}{}{}", age ? fmt::format("{:>6} ", age_cell) : "", cpu ? fmt::format("{:>5} ", cpu_cell) : "",
                       sm ? fmt::format("{:>4} ", sm_cell) : "", container ? fmt::format("{:<16} ", container_cell) : "");
  }
};

std::string header(const Snapshot& snapshot, const TerminalStyle& style, const OutputWidth& width) {
  const auto& d = snapshot.driver;
  const auto now = fmt::localtime(std::chrono::system_clock::to_time_t(snapshot.taken_at));
  std::vector<std::string> items = {style.bold("gpureap ps")};
  if (d.loaded) {
    items.push_back("driver " + (d.driver_version.empty() ? "?" : width.rest_of_line(d.driver_version, "")));
    if (d.cuda_driver_version) items.push_back("CUDA " + format_cuda_version(*d.cuda_driver_version));
    items.push_back(fmt::format("{} GPU{}", snapshot.gpus.size(), snapshot.gpus.size() == 1 ? "" : "s"));
  }
  items.push_back(fmt::format("{:%Y-%m-%d %H:%M:%S}", now));
  std::string out = width.joined(items, " · ", "  ") + "\n";
  if (d.loaded) {
    out += style.dim("NVML library: " + width.rest_of_line(d.library_path, "NVML library: ")) + "\n";
  } else if (d.no_nvidia_gpus()) {
    out += style.dim("No NVIDIA GPU here: its library is not needed") + "\n";  // an AMD- or Intel-only host
  } else {
    out += style.red("No GPU driver: ") + sanitize_for_terminal(d.message) + "\n";
    out += "Processes holding GPU device files are still listed below.\n";
  }
  if (snapshot.table.options().dev_dir != "/dev") {
    out += style.dim(fmt::format("GPU device files: {} (GPUREAP_DEV_DIR)",
                                 sanitize_for_terminal(snapshot.table.options().dev_dir))) +
           "\n";
  }
  if (d.count_error) {
    out += style.red(fmt::format("The driver could not count GPUs: {} ({})", d.count_error->name(),
                                 sanitize_for_terminal(d.count_error->message))) + "\n";
  }
  if (snapshot.processes_not_inspected > 0) {
    const std::size_t n = snapshot.processes_not_inspected;
    out += fit_lines(width, fmt::format("{} process{} could not be inspected (permission denied): GPU holders among them "
                                "are not shown.{}",
                                n, n == 1 ? "" : "es", geteuid() == 0 ? "" : " Run as root to see every holder."), "", "", [&](const std::string& line) { return style.yellow(line); });
  }
  if (snapshot.in_child_pid_namespace) {
    out += fit_lines(width,
                     "gpureap runs in a PID namespace (container): the driver reports host PIDs, which "
                     "do not exist here. Run on the host, or with --pid=host, to see who holds memory.",
                     "", "", [&](const std::string& line) { return style.yellow(line); });
  }
  return out;
}

std::string gpu_title(const GpuView& gpu, const TerminalStyle& style, const OutputWidth& width) {
  const auto& r = gpu.reading;
  std::vector<std::string> items = {style.bold(fmt::format("GPU {}", r.index))};
  if (!r.name.empty()) items.push_back(width.rest_of_line(r.name, ""));
  if (!r.pci_bus_id.empty()) items.push_back(width.rest_of_line(r.pci_bus_id, ""));
  if (r.minor_number) items.push_back(fmt::format("nvidia{}", *r.minor_number));
  if (r.temperature_c) items.push_back(fmt::format("{}°C", *r.temperature_c));
  if (r.power_mw) items.push_back(fmt::format("{:.0f} W", static_cast<double>(*r.power_mw) / 1000.0));
  if (r.util_gpu_percent) items.push_back(fmt::format("util {}%", *r.util_gpu_percent));
  if (r.persistence_mode) items.push_back(*r.persistence_mode ? "persistence on" : "persistence off");
  if (r.mig_enabled) items.push_back(fmt::format("MIG ({} instances)", r.mig_devices.size()));
  return width.joined(items, " · ", "      ") + "\n";
}

std::string gpu_error_line(const GpuView& gpu, const TerminalStyle& style, const OutputWidth& width) {
  const auto& e = *gpu.reading.error;
  std::string advice;
  if (e.code == 15) {
    advice = "the GPU fell off the bus or stopped responding; check `dmesg | grep -i xid` "
             "(Xid 79 needs a node power cycle)";
  } else if (e.code == 4) {
    advice = "no permission to query this GPU; run as root";
  } else {
    advice = "this GPU cannot be queried right now";
  }
  return fit_lines(width, fmt::format("error: {} from {} ({})", e.name(), e.call, sanitize_for_terminal(e.message)), "  ", "    ", [&](const std::string& line) { return style.red(line); }) +
         fit_lines(width, advice, "  ", "    ");
}

std::string memory_lines(const GpuView& gpu, const TerminalStyle& style, const OutputWidth& width) {
  const auto& m = gpu.memory;
  std::string out;
  if (!m.total || !m.used) {
    return fit_lines(width, "memory: unknown (the driver does not report it for this GPU)", "  ", "    ");
  }
  const double share = *m.total ? 100.0 * static_cast<double>(*m.used) / static_cast<double>(*m.total) : 0;
  const std::string figures = fmt::format(" {} used of {} ({:.0f}%)", format_bytes(*m.used), format_bytes(*m.total), share);
  std::string reserved = m.reserved ? fmt::format(", {} reserved by the driver", format_bytes(*m.reserved)) : "";
  // At a limited width the bar narrows (to kNarrowestBar cells) and the driver's reserve takes a
  // line of its own before anything is cut.
  int cells = kBarWidth;
  std::string reserved_line;
  if (const auto columns = width.columns()) {
    const std::size_t fixed = display_width("  memory []") + display_width(figures);
    if (fixed + static_cast<std::size_t>(kBarWidth) + display_width(reserved) > *columns && !reserved.empty()) {
      reserved_line = style.dim(fmt::format("    {} reserved by the driver", format_bytes(*m.reserved))) + "\n";
      reserved.clear();
    }
    const std::size_t room = *columns > fixed ? *columns - fixed : 0;
    cells = static_cast<int>(std::clamp<std::size_t>(room, kNarrowestBar, kBarWidth));
  }
  std::string bar = format_bar(*m.used, *m.total, cells);
  bar = share >= 90 ? style.red(bar) : share >= 60 ? style.yellow(bar) : style.green(bar);
  out += fmt::format("  memory [{}]{}", bar, figures);
  if (!reserved.empty()) out += style.dim(reserved);
  out += "\n" + reserved_line;
  const std::uint64_t tolerance = overhead_tolerance_bytes(gpu.reading.processes.size());
  if (m.unattributed && *m.unattributed > tolerance) {
    const std::string label = fmt::format("! {} unattributed:", format_bytes(*m.unattributed));
    std::string rest = " in use, but no process the driver lists explains it";
    rest += m.source == "v1" ? " (v1 memory info: includes driver-reserved memory)" : "";
    auto lines = width.wrapped(label + rest, "  ", "    ");
    // The label in colour where it begins the first line whole.
    if (lines[0].rfind("  " + label, 0) == 0) lines[0] = "  " + style.yellow(label) + lines[0].substr(2 + label.size());
    for (const auto& line : lines) out += line;
    out += fit_lines(width, "(a leak, a release in progress, or holders the driver does not list; see holders below "
                    "and `gpureap doctor`)", "    ", "    ");
  } else if (m.unattributed && *m.unattributed > 0) {
    out += fit_lines(width, fmt::format("{} not attributed to any process: the driver's own per-context overhead",
                                format_bytes(*m.unattributed)), "  ", "    ", [&](const std::string& line) { return style.dim(line); });
  } else if (!m.unattributed && !gpu.reading.processes.empty()) {
    out += fit_lines(width, "attribution incomplete: the driver does not report every process's memory", "  ", "    ", [&](const std::string& line) { return style.dim(line); });
  }
  return out;
}

// Title, then either the GPU's error or its memory and the driver's warnings.
std::string gpu_heading(const GpuView& gpu, const TerminalStyle& style, const OutputWidth& width) {
  std::string out = gpu_title(gpu, style, width);
  if (gpu.reading.error) return out + gpu_error_line(gpu, style, width);
  out += memory_lines(gpu, style, width);
  for (const auto& w : gpu.reading.warnings) {
    out += fit_lines(width, "warning: " + sanitize_for_terminal(w), "  ", "    ", [&](const std::string& line) { return style.yellow(line); });
  }
  return out;
}

std::string identity_cell(Identity identity, const TerminalStyle& style) {
  const std::string name = fmt::format("{:<10}", identity_name(identity));
  switch (identity) {
    case Identity::Ok: return style.green(name);
    case Identity::Foreign: return style.yellow(name);
    case Identity::Mismatch: return style.red(name);
    case Identity::Unverified: return style.dim(name);
  }
  return name;
}

std::string container_cell(const ProcessInfo* p) {
  if (p == nullptr || !p->container) return "-";
  const auto& c = *p->container;
  std::string id = c.id.empty() ? ("pod " + c.pod_uid.substr(0, 8)) : c.id.substr(0, 12);
  // A rootless container's id is its user's word: the cell says whose.
  const std::string owner = c.rootless_uid ? fmt::format("~{}:", *c.rootless_uid) : std::string();
  return fixed_cell(owner + c.runtime + ":" + id, 16);
}

// " [MPS server, 2 clients]", " [MPS client of 1234]": the role the kernel's socket table proves.
std::string mps_note(const GpuProcessView& view) {
  switch (view.mps_role) {
    case MpsRole::Server:
      return fmt::format(" [MPS server, {} client{}]", view.mps_clients, view.mps_clients == 1 ? "" : "s");
    case MpsRole::Client:
      return view.mps_server ? fmt::format(" [MPS client of {}]", *view.mps_server) : " [MPS client, server not proven]";
    case MpsRole::None: break;
  }
  return "";
}

// Where a row's own words continue on the next line.
constexpr std::string_view kContinuation = "          ";

bool fits(const OutputWidth& width, std::string_view line) {
  return !width.columns() || visible_width(line) <= *width.columns();
}

std::string process_row(const GpuProcessView& view, const TerminalStyle& style, const OutputWidth& width,
                        const ProcessColumns& columns) {
  const ProcessInfo* p = view.linux_process;
  std::string mig;
  if (view.driver.gpu_instance_id) {
    mig = fmt::format(" [GI {} CI {}]", *view.driver.gpu_instance_id,
                      view.driver.compute_instance_id.value_or(0));
  }
  std::string sm = view.driver.sm_util_percent ? fmt::format("{}%", *view.driver.sm_util_percent) : "-";
  if (p == nullptr) {
    std::string why = "(no such PID here: another PID namespace, or exited)";
    if (!view.held_by.empty()) {
      why = "(exited; its context is kept alive by PID";
      for (pid_t pid : view.held_by) why += " " + std::to_string(pid);
      why += ")";
    } else if (!view.holders_here.empty()) {
      why = "(a host PID; here PID";
      for (pid_t pid : view.holders_here) why += " " + std::to_string(pid);
      why += " hold" + std::string(view.holders_here.size() == 1 ? "s" : "") + " this GPU)";
    }
    const std::string start = fmt::format("  {:>7} {:<9} {:<4} {:>10} {} {:<2} {}", view.driver.pid, "-",
                                          view.driver.types.label(), format_bytes(view.driver.used_memory),
                                          identity_cell(view.identity, style), "-", columns.cells("-", "-", sm, "-"));
    if (fits(width, start + why + mig)) return start + style.dim(why) + mig + "\n";
    // gpureap's own explanation is never cut: it continues under the row.
    return start + "-\n" + fit_lines(width, why + mig, kContinuation, kContinuation, [&](const std::string& line) { return style.dim(line); });
  }
  std::string state(1, p->state);
  if (p->state == 'D' && !p->wchan.empty()) state += " (" + sanitize_for_terminal(p->wchan) + ")";
  std::string ns;
  if (p->ns_pids.size() > 1) ns = fmt::format(" [pid {} in its namespace]", p->ns_pids.back());
  ns += mps_note(view);
  const std::string start = fmt::format(
      "  {:>7} {} {:<4} {:>10} {} {:<2} {}", view.driver.pid, fixed_cell(p->user, 9), view.driver.types.label(),
      format_bytes(view.driver.used_memory), identity_cell(view.identity, style), state,
      columns.cells(format_duration(p->elapsed_seconds), fmt::format("{:.1f}", p->cpu_percent), sm, container_cell(p)));
  // The command takes what the rest of the line leaves; the namespace and MIG notes stay whole,
  // under the row when they leave the command too little.
  const std::string notes = ns + mig;
  if (notes.empty() || fits(width, start + notes + std::string(OutputWidth::kMinimumColumns, ' '))) {
    return start + width.rest_of_line(p->command(), start + notes) + notes + "\n";
  }
  return start + width.rest_of_line(p->command(), start) + "\n" + fit_lines(width, notes.substr(1), kContinuation, kContinuation);
}

std::string holder_note(const HolderView& holder) {
  if (holder.role == HolderRole::Worker) return fmt::format("worker of {} (inherited)", *holder.listed_ancestor);
  if (holder.role == HolderRole::Orphan && holder.context_of) return fmt::format("ORPHAN: keeps {}'s memory", *holder.context_of);
  if (holder.role == HolderRole::Orphan) return "ORPHAN: its job is gone";
  if (holder.role == HolderRole::Client) return "driver client, no memory";
  return "not listed by the driver";
}

// The holder table's PPID column gives way when a limited width would leave the command fewer
// than OutputWidth::kMinimumColumns.
bool holder_ppid_fits(const OutputWidth& width) {
  constexpr std::size_t kWithPpid = 2 + 8 + 10 + 8 + 3 + 7 + 29;
  return !width.columns() || kWithPpid + OutputWidth::kMinimumColumns <= *width.columns();
}

std::string holder_row(const HolderView& holder, const TerminalStyle& style, const OutputWidth& width) {
  const ProcessInfo& p = *holder.linux_process;
  std::string note = fmt::format("{:<28}", holder_note(holder));
  note = holder.role == HolderRole::Orphan ? style.red(note) : style.yellow(note);
  const std::string ppid = holder_ppid_fits(width) ? fmt::format("{:>7} ", p.ppid) : "";
  const std::string start = fmt::format("  {:>7} {} {}{:<2} {:>6} {} ", holder.pid, fixed_cell(p.user, 9), ppid,
                                        std::string(1, p.state), format_duration(p.elapsed_seconds), note);
  return start + width.rest_of_line(p.command(), start) + "\n";
}

std::string holder_header(const OutputWidth& width) {
  return fmt::format("      PID USER      {}S     AGE ROLE                         COMMAND\n",
                     holder_ppid_fits(width) ? "   PPID " : "");
}

}  // namespace

std::string render_ps_table(const Snapshot& snapshot, const PsFilter& filter, const TerminalStyle& style,
                            const OutputWidth& width) {
  std::string out = header(snapshot, style, width);
  const ProcessColumns columns = ProcessColumns::fitting(width);
  bool process_rows = false;
  std::set<pid_t> shown_holders;
  for (const auto& gpu : snapshot.gpus) {
    if (!filter.gpu_selected(gpu.reading.index)) continue;
    out += "\n" + gpu_heading(gpu, style, width);
    if (gpu.reading.error) continue;
    std::string rows;
    for (const auto& process : snapshot.processes) {
      if (process.gpu_index == gpu.reading.index && filter.process_selected(process)) {
        rows += process_row(process, style, width, columns);
      }
    }
    out += rows.empty() ? style.dim(filter.linux_filter() ? "  no listed process matches the selection"
                                                          : "  no processes listed by the driver") + "\n"
                        : style.dim(columns.header()) + rows;
    process_rows = process_rows || !rows.empty();
    std::string holder_rows;
    for (const auto& holder : snapshot.holders) {
      if (holder.listed_by_driver || !filter.holder_selected(holder)) continue;
      if (!holder.holds_gpu(gpu.reading.index)) continue;
      holder_rows += holder_row(holder, style, width);
      shown_holders.insert(holder.pid);
    }
    if (!holder_rows.empty()) {
      out += "  " + style.bold("Also holding this GPU's device files, not listed by the driver:") + "\n" +
             style.dim(holder_header(width)) + holder_rows;
    }
  }
  std::string others;
  for (const auto& holder : snapshot.holders) {
    if (holder.listed_by_driver || shown_holders.count(holder.pid) || !filter.holder_selected(holder)) continue;
    others += holder_row(holder, style, width);
  }
  if (!others.empty()) {
    out += "\n" + style.bold(snapshot.driver.loaded ? "Other holders of GPU device files:"
                                                    : "Holders of GPU device files:") +
           "\n" + style.dim(holder_header(width)) + others;
  }
  out += render_drm_gpus(snapshot, filter, style, width);
  const bool drm_holders = std::any_of(snapshot.table.processes().begin(), snapshot.table.processes().end(),
                                       [](const auto& entry) { return entry.second.holds_any_drm_file(); });
  if (snapshot.holders.empty() && !drm_holders) {
    out += fmt::format("\nNo process holds a GPU device file under {}.\n",
                       sanitize_for_terminal(snapshot.table.options().dev_dir));
  }
  if (snapshot.gpus.empty() && snapshot.driver.loaded && !snapshot.driver.count_error) {
    out += "\nNo GPUs reported by the driver.\n";
  }
  if (process_rows && !columns.left_out().empty()) {
    out += "\n" + fit_lines(width, fmt::format("{} left out to fit {} columns: --wide shows every column.",
                                       fmt::join(columns.left_out(), ", "), *width.columns()), "", "", [&](const std::string& line) { return style.dim(line); });
  }
  return out;
}

namespace {

// Descendants drawn with box characters; each labelled with its role towards the GPU.
struct TreeWalker {
  const Snapshot& snapshot;
  const TerminalStyle& style;
  const OutputWidth& width;
  std::string& out;
  int minor;
  void walk(pid_t pid, const std::string& prefix) {
    auto children = snapshot.table.children_of(pid);
    for (std::size_t i = 0; i < children.size(); ++i) {
      const bool last = i + 1 == children.size();
      const ProcessInfo* child = snapshot.table.find(children[i]);
      if (child == nullptr) continue;
      std::string role;
      if (child->state == 'Z') {
        role = style.dim("zombie (holds no memory)");
      } else if (minor >= 0 ? child->holds_gpu_minor(minor) : child->holds_any_device_file()) {
        role = style.yellow("worker: holds this GPU's descriptors");
      } else if (child->holds_any_device_file()) {
        role = style.yellow("holds other GPU device files");
      } else {
        role = style.dim("child: no GPU descriptors");
      }
      const std::string start = fmt::format("  {}{} {:>7} {} {} {}  ", prefix, last ? "└─" : "├─", child->pid,
                                            fixed_cell(child->user, 9), std::string(1, child->state), role);
      out += start + width.rest_of_line(child->command(), start) + "\n";
      walk(child->pid, prefix + (last ? "   " : "│  "));
    }
  }
};

// One GPU's listed processes and its holders the driver does not list, each with its tree.
void render_gpu_tree(const Snapshot& snapshot, const GpuView& gpu, const PsFilter& filter, const TerminalStyle& style,
                     const OutputWidth& width, std::string& out) {
  const int minor = gpu.reading.minor_number ? static_cast<int>(*gpu.reading.minor_number) : -1;
  bool any = false;
  for (const auto& process : snapshot.processes) {
    if (process.gpu_index != gpu.reading.index || !filter.process_selected(process)) continue;
    any = true;
    const ProcessInfo* p = process.linux_process;
    const std::string start = fmt::format("  {:>7} {} {:<4} {:>10} {} ", process.driver.pid,
                                          fixed_cell(p ? p->user : "-", 9), process.driver.types.label(),
                                          format_bytes(process.driver.used_memory),
                                          identity_cell(process.identity, style));
    out += start + (p ? width.rest_of_line(p->command(), start) : style.dim("(no such PID here)")) + "\n";
    if (p != nullptr && process.identity != Identity::Mismatch) {
      TreeWalker{snapshot, style, width, out, minor}.walk(p->pid, "");
    }
  }
  if (!any) {
    out += style.dim(filter.linux_filter() ? "  no listed process matches the selection" : "  no processes listed by the driver") + "\n";
  }
  for (const auto& holder : snapshot.holders) {
    if (holder.listed_by_driver || holder.listed_ancestor || !filter.holder_selected(holder)) continue;
    if (!holder.holds_gpu(gpu.reading.index)) continue;
    const ProcessInfo& p = *holder.linux_process;
    const std::string start =
        fmt::format("  {:>7} {} {} {}  ", holder.pid, fixed_cell(p.user, 9), std::string(1, p.state),
                    style.red(holder.role == HolderRole::Orphan ? "ORPHAN holder (its job is over)" : "unlisted holder"));
    out += start + width.rest_of_line(p.command(), start) + "\n";
    TreeWalker{snapshot, style, width, out, minor}.walk(holder.pid, "");
  }
}

}  // namespace

std::string render_ps_tree(const Snapshot& snapshot, const PsFilter& filter, const TerminalStyle& style,
                           const OutputWidth& width) {
  std::string out = header(snapshot, style, width);
  for (const auto& gpu : snapshot.gpus) {
    if (!filter.gpu_selected(gpu.reading.index)) continue;
    out += "\n" + gpu_heading(gpu, style, width);
    if (gpu.reading.error) continue;
    render_gpu_tree(snapshot, gpu, filter, style, width, out);
  }
  if (!snapshot.driver.loaded) {
    out += "\n" + style.bold("Holders of GPU device files:") + "\n";
    for (const auto& holder : snapshot.holders) {
      if (!filter.holder_selected(holder)) continue;
      const ProcessInfo& p = *holder.linux_process;
      const std::string start = fmt::format("  {:>7} {} ppid {:<7} ", holder.pid, fixed_cell(p.user, 9), p.ppid);
      out += start + width.rest_of_line(p.command(), start) + "\n";
      TreeWalker{snapshot, style, width, out, -1}.walk(holder.pid, "");
    }
  }
  return out;
}

}  // namespace gpureap
