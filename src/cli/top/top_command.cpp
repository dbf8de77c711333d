#include "cli/top/top_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <clocale>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/option_limits.hpp"
#include "cli/common/snapshot_status.hpp"
#include "cli/common/terminal_io.hpp"
#include "cli/top/top_screen.hpp"
#include "audit/audit_log.hpp"
#include "kill/kill_config.hpp"
#include "text/charset.hpp"
#include "text/duration.hpp"
#include "text/sanitize.hpp"
#include "text/terminal_style.hpp"
#include "text/terminal_width.hpp"
#include "top/action_worker.hpp"
#include "top/key_machine.hpp"
#include "top/snapshot_refresher.hpp"
#include "top/top_layout.hpp"
#include "top/top_state.hpp"

namespace gpureap {
namespace {

constexpr const char* kName = "gpureap top";
// A process with no GPU device file is looked at in full at least every this many refreshes.
constexpr unsigned kFullLookEvery = 20;

int usage_error(const std::string& message) {
  std::cerr << kName << ": " << message << "\n";
  return exit_code::kUsage;
}

std::vector<unsigned> gpu_list(std::optional<unsigned> gpu) {
  return gpu ? std::vector<unsigned>{*gpu} : std::vector<unsigned>{};
}

std::string styled(const Frame& frame, const TerminalStyle& style) {
  std::string out;
  for (const auto& line : frame.lines) {
    std::string text;
    for (const auto& span : line.spans) {
      if (span.text.find_first_not_of(' ') == std::string::npos) {  // blank cells need no colour codes
        text += span.text;
        continue;
      }
      switch (span.tone) {
        case Tone::Normal: text += span.text; break;
        case Tone::Strong: text += style.bold(span.text); break;
        case Tone::Dim: text += style.dim(span.text); break;
        case Tone::Good: text += style.green(span.text); break;
        case Tone::Warn: text += style.yellow(span.text); break;
        case Tone::Bad: text += style.red(span.text); break;
        case Tone::Unattributed: text += style.cyan(span.text); break;
      }
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  }
  return out;
}

// What ps reads: holders with their trees. `repeated`: each refresh looks again only at the
// processes that may have changed since the last (proc/fd_look_memory.hpp): looking at every
// descriptor of every process each second costs a busy host a good part of a core
// (docs/performance.md).
SnapshotOptions view_snapshot_options(bool repeated) {
  SnapshotOptions options = default_snapshot_options();
  options.proc.scope = ProcScanScope::Holders;
  if (repeated) {
    options.proc.memory = std::make_shared<FdLookMemory>(kFullLookEvery);
    // A new holder in the next refresh, and a walk of /proc only every 5 minutes.
    options.holder_events = std::make_shared<HolderEvents>(300);
  }
  return options;
}

// Without the kernel's holder events a process that opens a GPU device file shows only when
// the refreshes look at it again: said once on the status line, when it is free. True once said
// (or when there is nothing to say).
bool tell_holder_fallback(TopState& state, const Snapshot& snapshot) {
  if (!snapshot.holder_events || snapshot.holder_events->active) return true;
  if (!state.status.empty()) return false;
  state.set_status(fmt::format("{} (a new holder may take {} refreshes to show)", snapshot.holder_events->fallback_reason,
                               kFullLookEvery),
                   StatusTone::Info);
  return true;
}

int run_once(const TopOptions& options, const TopState& prototype) {
  SnapshotSource source(view_snapshot_options(false));
  auto snapshot = source.take();
  if (auto error = unknown_gpu_error(*snapshot, gpu_list(options.gpu)); !error.empty()) return usage_error(error);
  TopState state;
  state.order = prototype.order;
  state.readonly = prototype.readonly;
  state.can_kill_any = true;  // nothing is offered: no marks for what this user may not end
  CpuSampler cpu;  // first sight: each process's lifetime average
  const int status = snapshot_exit_status(*snapshot);
  state.rows = build_rows(*snapshot, cpu, RowContext{});
  state.snapshot = std::move(snapshot);
  reorder(state);
  const auto columns = OutputWidth::for_fd(STDOUT_FILENO, false).columns();
  LayoutOptions layout;
  layout.width = columns.value_or(100000);  // through a pipe nothing is cut
  layout.ascii = terminal_charset() == Charset::Ascii;
  layout.interval_s = options.interval_s;
  const TerminalStyle style = TerminalStyle::for_fd(STDOUT_FILENO, parse_color_choice(options.color));
  write_text(styled(layout_frame(state, layout), style));
  return status;
}

// ---- the interactive loop ---------------------------------------------------------------------

// Signals become bytes on a pipe the loop polls: SIGWINCH (resize), SIGINT/SIGTERM/SIGHUP (leave).
int g_signal_pipe = -1;
void on_signal(int signal) {
  const unsigned char byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe, &byte, 1);
}

class SignalPipe {
 public:
  SignalPipe() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
    read_ = procfs::unique_fd(fds[0]);
    write_ = procfs::unique_fd(fds[1]);
    g_signal_pipe = write_.get();
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~SignalPipe() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
    g_signal_pipe = -1;
  }
  int fd() const { return read_.get(); }
  // The signals received since the last call.
  std::vector<int> take() {
    std::vector<int> signals;
    unsigned char byte = 0;
    while (::read(read_.get(), &byte, 1) == 1) signals.push_back(byte);
    return signals;
  }

 private:
  static constexpr std::array<int, 4> kSignals{SIGWINCH, SIGINT, SIGTERM, SIGHUP};
  procfs::unique_fd read_, write_;
  std::array<struct sigaction, kSignals.size()> previous_{};
};

// The interactive loop's parts and what it has learnt so far; each step handles one source.
struct TopLoop {
  TopLoop(TopState& top_state, TopScreen& top_screen, SignalPipe& signal_pipe, SnapshotRefresher& snapshots,
          ActionWorker& actions, const std::vector<std::string>& protected_names)
      : state(top_state),
        screen(top_screen),
        signals(signal_pipe),
        refresher(snapshots),
        worker(actions),
        protect(protected_names) {}

  TopState& state;
  TopScreen& screen;
  SignalPipe& signals;
  SnapshotRefresher& refresher;
  ActionWorker& worker;
  const std::vector<std::string>& protect;
  LayoutOptions layout;
  CpuSampler cpu;
  std::optional<PlanPolicy> policy;  // who is looking: the permission marks, protection
  int exit_status = exit_code::kOk;
  bool checked_gpu = false;
  bool holder_fallback_told = false;
  int quit_signal = 0;  // what told top to leave (a closed terminal reads as SIGHUP)

  void draw() {
    layout.width = screen.width();
    layout.height = screen.height();
    keep_cursor_visible(state, table_capacity(state, layout));
    screen.paint(layout_frame(state, layout));
  }

  // SIGWINCH follows the terminal's size; any other signal leaves.
  void take_signals() {
    for (int s : signals.take()) {
      if (s == SIGWINCH) {
        screen.follow_resize();
      } else {
        state.quit = true;
        exit_status = exit_code::interrupted_by(s);
        if (quit_signal == 0) quit_signal = s;
      }
    }
  }

  // The first snapshot also checks --gpu and learns who is looking.
  void take_snapshot() {
    auto snapshot = refresher.take_latest();
    if (!snapshot) return;
    if (!checked_gpu) {
      checked_gpu = true;
      if (auto message = unknown_gpu_error(*snapshot, gpu_list(state.order.gpu)); !message.empty()) {
        state.order.gpu.reset();
        state.set_status(message + ": showing every GPU", StatusTone::Bad);
      }
    }
    if (!policy) {
      policy = PlanPolicy::for_current_process(*snapshot);
      for (const auto& name : protect) policy->protect.add(name);
      state.can_kill_any = policy->can_kill_any;
    }
    if (!holder_fallback_told) holder_fallback_told = tell_holder_fallback(state, *snapshot);
    RowContext context;
    context.policy = &*policy;
    apply_snapshot(state, std::move(snapshot), cpu, context);
  }

  void take_action_events() {
    for (auto& event : worker.take_events()) {
      const bool finished = event.kind == ActionEvent::Kind::KillFinished;
      if (event.interrupted_by != 0) exit_status = exit_code::interrupted_by(event.interrupted_by);
      apply_event(state, std::move(event));
      if (finished) refresher.refresh_now();  // show at once what the kill left
    }
  }

  void take_keys(short revents) {
    if (revents & (POLLHUP | POLLERR)) {  // the terminal went away
      state.quit = true;
      if (quit_signal == 0) quit_signal = SIGHUP;
    }
    const std::size_t page = table_capacity(state, layout);
    while (auto key = screen.read_key()) {
      const KeyAction action = handle_key(state, *key, page);
      switch (action.kind) {
        case KeyAction::Kind::None: case KeyAction::Kind::Quit: break;
        case KeyAction::Kind::Plan: worker.plan(action.chosen); break;
        case KeyAction::Kind::Execute: worker.execute(action.ladder); break;
        case KeyAction::Kind::Discard: worker.discard_plan(); break;
        case KeyAction::Kind::Doctor: worker.doctor(action.gpu); break;
      }
    }
  }

  // Until told to quit: each wake handles signals, a new snapshot, the worker's events, keys.
  void run() {
    draw();
    while (!state.quit) {
      std::array<pollfd, 4> fds{{{STDIN_FILENO, POLLIN, 0}, {signals.fd(), POLLIN, 0}, {refresher.fd(), POLLIN, 0},
                                 {worker.fd(), POLLIN, 0}}};
      if (poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds[1].revents & POLLIN) take_signals();
      if (fds[2].revents & POLLIN) take_snapshot();
      if (fds[3].revents & POLLIN) take_action_events();
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) take_keys(fds[0].revents);
      draw();
    }
  }
};

int run_interactive(const TopOptions& options, TopState state, ActionSettings settings) {
  if (isatty(STDIN_FILENO) != 1 || isatty(STDOUT_FILENO) != 1) {
    return usage_error("needs a terminal on stdin and stdout; use --once for plain output through a pipe");
  }
  SignalPipe signals;  // before the screen: ncurses then leaves these signals to us
  const bool color = TerminalStyle::for_fd(STDOUT_FILENO, parse_color_choice(options.color)).enabled();
  std::string error;
  auto screen = TopScreen::open(color, error);
  if (!screen) return usage_error(error);

  const auto interval = std::chrono::milliseconds(static_cast<long long>(options.interval_s * 1000));
  SnapshotRefresher refresher(view_snapshot_options(true), interval);
  const std::vector<std::string> protect = settings.protect;
  auto worker = std::make_unique<ActionWorker>(std::move(settings));
  TopLoop loop(state, *screen, signals, refresher, *worker, protect);
  loop.layout.ascii = screen->ascii();
  loop.layout.interval_s = options.interval_s;
  loop.run();
  // Told to leave: a ladder under way stops at its next step and continues what it stopped.
  if (loop.quit_signal != 0) worker->interrupt(loop.quit_signal);
  if (worker->busy()) {
    state.set_status("finishing the action in progress before quitting…", StatusTone::Busy);
    loop.draw();
  }
  worker.reset();  // waits for a ladder under way: processes it stopped are never left stopped
  return loop.exit_status;
}

}  // namespace

CLI::App* add_top_command(CLI::App& app, TopOptions& options) {
  CLI::App* top = app.add_subcommand(
      "top", "Live view of every GPU and what holds it; end processes from it, with the memory verified free");
  top->footer(
      "Keys: arrows or j/k move, space tags, K (or x, Del, F9) ends the tagged or selected processes\n"
      "after showing kill's plan (what will be signalled and why, what is refused and why, the\n"
      "memory expected back) and offering SIGTERM then SIGKILL, SIGTERM only, SIGINT or SIGKILL;\n"
      "t tree, s sort, / filter, g one GPU, d the doctor's findings, ? help, q quit. The mouse\n"
      "selects. Ending goes through the kill engine on a worker thread (the processes are pinned\n"
      "when the plan is made, every signal is audited, the driver confirms the release) while the\n"
      "screen keeps refreshing; the status line reports the outcome.\n\n"
      "Exit status: 0 on quit; 2 usage error (also: no terminal without --once); 128+signal when\n"
      "SIGINT, SIGTERM or SIGHUP ended it. With --once, ps's: 0 ok, 3 no libnvidia-ml.so.1 (holders\n"
      "still listed), 4 driver failed to initialise, 5 a GPU reported an error.\n\n"
      "Configuration: $GPUREAP_CONFIG, else /etc/gpureap/config.toml: [kill] protect, audit_log.\n"
      "Environment: GPUREAP_AUDIT_LOG, GPUREAP_CONFIG, GPUREAP_NVML_LIBRARY, GPUREAP_DEV_DIR, NO_COLOR.");
  top->add_option("--interval", options.interval,
                  "Seconds between refreshes, 0.1 to 86400 (default 1; also 500ms, 2m)");
  top->add_flag("--once", options.once, "Print one frame as plain text and exit (for pipes and scripts)");
  top->add_flag("--readonly", options.readonly, "Look only: every action that would signal a process is disabled");
  top->add_flag("--tree", options.tree, "Start in the tree view (workers under their process)");
  top->add_option("--sort", options.sort, "Sort by memory (default), cpu, age or pid");
  top->add_option("--gpu", options.gpu, "Start with this GPU index only");
  top->add_option("--audit-log", options.audit_log, "Append one JSON line per signal to this file (mode 0600)");
  add_color_option(top, options.color);
  return top;
}

int run_top(TopOptions options) {
  if (auto error = check_duration_option("--interval", options.interval, option_limits::kMaxWatchSeconds,
                                         options.interval_s, option_limits::kMinWatchSeconds);
      !error.empty()) {
    return usage_error(error);
  }
  TopState state;
  const auto sort = parse_sort_key(options.sort);
  if (!sort) return usage_error("--sort " + sanitize_for_terminal(options.sort) + ": sort by memory, cpu, age or pid");
  state.order.sort = *sort;
  state.order.tree = options.tree;
  state.order.gpu = options.gpu;
  state.readonly = options.readonly;
  std::setlocale(LC_ALL, "");  // UTF-8 text and glyphs where the terminal's locale has them
  if (options.once) return run_once(options, state);

  std::string config_error;
  const auto config = load_kill_config(config_error);
  if (!config) return usage_error(sanitize_for_terminal(config_error));
  ActionSettings settings;
  settings.snapshot = default_snapshot_options();
  settings.protect = config->protect;
  // The audit log first: if it cannot be written, nothing may be signalled.
  std::optional<AuditLog> audit;
  if (const std::string path = audit_log_path(options.audit_log, *config); !path.empty() && !options.readonly) {
    std::string error;
    audit = AuditLog::open(path, Requester::current(), error);
    if (!audit) return usage_error(sanitize_for_terminal(error) + "; nothing can be signalled");
    settings.audit = &*audit;
  }
  return run_interactive(options, std::move(state), std::move(settings));
}

}  // namespace gpureap
