// top's view without a terminal: rows ordered, filtered and nested; the keys as a state
// machine; the layout at 80x24; CPU from deltas; the outcome line of a kill; AMD and Intel
// GPUs' DRM clients and their engine use.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "text/truncate.hpp"
#include "top/cpu_sampler.hpp"
#include "top/drm_engine_sampler.hpp"
#include "top/key_machine.hpp"
#include "top/kill_preview.hpp"
#include "top/row_order.hpp"
#include "top/top_layout.hpp"
#include "top/top_state.hpp"

namespace gpureap {
namespace {

constexpr std::uint64_t GiB = 1ull << 30;

TopRow row(pid_t pid, unsigned gpu, std::optional<std::uint64_t> memory, std::string command,
           RowKind kind = RowKind::GpuProcess) {
  TopRow r;
  r.kind = kind;
  r.gpu = gpu;
  r.key = {pid, static_cast<std::uint64_t>(pid) * 10};
  r.gpu_memory = memory;
  r.command = std::move(command);
  r.user = "ann";
  r.state = 'S';
  r.age_seconds = 1000.0 - pid;
  r.cpu_percent = pid % 7;
  return r;
}

TopRow worker(pid_t pid, unsigned gpu, pid_t parent) {
  TopRow r = row(pid, gpu, std::nullopt, "python train.py", RowKind::Worker);
  r.parent = parent;
  r.role = "worker of " + std::to_string(parent);
  return r;
}

TopRow orphan(pid_t pid, unsigned gpu, pid_t dead_owner) {
  TopRow r = row(pid, gpu, std::nullopt, "python old.py", RowKind::Orphan);
  r.parent = dead_owner;
  r.role = "orphan of PID " + std::to_string(dead_owner);
  return r;
}

std::vector<pid_t> pids(const std::vector<DisplayRow>& shown) {
  std::vector<pid_t> out;
  for (const auto& d : shown) out.push_back(d.row.pid());
  return out;
}

TEST(TopOrder, SortsByTheKeyWithUnknownMemoryLast) {
  const std::vector<TopRow> rows = {row(30, 0, 1 * GiB, "a"), row(10, 1, 4 * GiB, "b"), row(20, 0, std::nullopt, "c"),
                                    row(40, 0, 2 * GiB, "d")};
  RowOrder order;
  EXPECT_EQ(pids(order_rows(rows, order)), (std::vector<pid_t>{10, 40, 30, 20}));
  order.sort = SortKey::Pid;
  EXPECT_EQ(pids(order_rows(rows, order)), (std::vector<pid_t>{10, 20, 30, 40}));
  order.sort = SortKey::Age;  // oldest first: age is 1000 - pid here
  EXPECT_EQ(pids(order_rows(rows, order)), (std::vector<pid_t>{10, 20, 30, 40}));
  order.gpu = 0;
  EXPECT_EQ(pids(order_rows(rows, order)), (std::vector<pid_t>{20, 30, 40}));
}

TEST(TopOrder, TheFilterIsPlainTextCaseFoldedOverPidUserRoleAndCommand) {
  std::vector<TopRow> rows = {row(101, 0, GiB, "python Train.py"), row(202, 0, GiB, "a.*b"), worker(303, 0, 101)};
  RowOrder order;
  order.filter = "train";
  EXPECT_EQ(pids(order_rows(rows, order)), (std::vector<pid_t>{101, 303}));
  order.filter = "a.*";  // a pattern would match everything; the text matches one command
  EXPECT_EQ(pids(order_rows(rows, order)), (std::vector<pid_t>{202}));
  order.filter = "WORKER OF";
  EXPECT_EQ(pids(order_rows(rows, order)), (std::vector<pid_t>{303}));
  order.filter = "20";
  EXPECT_EQ(pids(order_rows(rows, order)), (std::vector<pid_t>{202}));
}

TEST(TopOrder, TheTreeNestsWorkersAndOrphansUnderTheirOwnersDeadOrAlive) {
  TopRow gone = row(500, 0, 3 * GiB, "(exited)", RowKind::Gone);
  std::vector<TopRow> rows = {worker(102, 0, 100), row(100, 0, 2 * GiB, "train"), worker(101, 0, 100), gone,
                              orphan(501, 0, 500), orphan(601, 1, 600), row(700, 1, GiB, "serve")};
  RowOrder order;
  order.tree = true;
  const auto shown = order_rows(rows, order);
  // GPU 0: the gone owner (3 GiB) and its orphan, the job and its workers; GPU 1: serve, then
  // a placeholder for the dead owner 600 that no row stands for, with its orphan.
  EXPECT_EQ(pids(shown), (std::vector<pid_t>{500, 501, 100, 101, 102, 700, 600, 601}));
  EXPECT_EQ(shown[1].tree_prefix, "└─ ");
  EXPECT_EQ(shown[3].tree_prefix, "├─ ");
  EXPECT_EQ(shown[4].tree_prefix, "└─ ");
  EXPECT_TRUE(shown[6].placeholder);
  EXPECT_EQ(shown[6].row.role, "gone");
  EXPECT_FALSE(shown[6].row.can_act);
  // A match deep in a tree keeps the path to it; the rest of the tree goes.
  order.filter = "102";
  EXPECT_EQ(pids(order_rows(rows, order)), (std::vector<pid_t>{100, 102}));
}

TEST(TopOrder, RowsWhoseParentsPointAtEachOtherAreStillShown) {
  std::vector<TopRow> rows = {worker(1, 0, 2), worker(2, 0, 1)};
  RowOrder order;
  order.tree = true;
  auto shown = pids(order_rows(rows, order));
  std::sort(shown.begin(), shown.end());
  EXPECT_EQ(shown, (std::vector<pid_t>{1, 2}));
}

TopState state_with(std::vector<TopRow> rows) {
  TopState state;
  state.rows = std::move(rows);
  reorder(state);
  return state;
}

Key press(char32_t c) { return Key{Key::Kind::Char, c, std::nullopt}; }
Key key(Key::Kind kind) { return Key{kind, 0, std::nullopt}; }

TEST(TopKeys, SpaceTagsAndMovesKEndsTheTaggedAndTheConfirmationChoosesTheLadder) {
  TopState state = state_with({row(10, 0, 4 * GiB, "a"), row(20, 0, 2 * GiB, "b"), row(30, 0, GiB, "c")});
  handle_key(state, press(' '), 10);
  handle_key(state, press('j'), 10);
  handle_key(state, press(' '), 10);
  EXPECT_EQ(state.tags.size(), 2u);
  EXPECT_EQ(state.cursor, 2u);  // the last row: the cursor stops there
  KeyAction action = handle_key(state, press('K'), 10);
  ASSERT_EQ(action.kind, KeyAction::Kind::Plan);
  EXPECT_EQ(action.chosen, (std::vector<ProcessKey>{{10, 100}, {30, 300}}));
  EXPECT_EQ(state.mode, Mode::Planning);

  KillPreview preview;
  preview.signalled.push_back({10, "ann a", "chosen in the view"});
  ActionEvent ready;
  ready.kind = ActionEvent::Kind::PlanReady;
  ready.preview = preview;
  apply_event(state, ready);
  EXPECT_EQ(state.mode, Mode::Confirm);
  action = handle_key(state, press('t'), 10);
  EXPECT_EQ(action.kind, KeyAction::Kind::Execute);
  EXPECT_EQ(action.ladder, Ladder::TermOnly);
  EXPECT_TRUE(state.kill_running);
  // A second kill waits for the first one's outcome.
  EXPECT_EQ(handle_key(state, press('K'), 10).kind, KeyAction::Kind::None);
  ActionEvent done;
  done.kind = ActionEvent::Kind::KillFinished;
  done.status = "GPU 0: 4.0 GiB verified free in 12 ms";
  done.succeeded = true;
  apply_event(state, done);
  EXPECT_FALSE(state.kill_running);
  EXPECT_EQ(state.status_tone, StatusTone::Good);
}

// The confirmation of a plan that signals PID 10.
TopState confirming_one() {
  TopState state = state_with({row(10, 0, GiB, "a")});
  handle_key(state, press('x'), 10);
  state.preview = KillPreview{};
  state.preview->signalled.push_back({10, "ann a", "chosen in the view"});
  state.mode = Mode::Confirm;
  return state;
}

TEST(TopKeys, EachLadderHasItsKeyAndEscapeSignalsNothing) {
  const std::vector<std::pair<Key, Ladder>> choices = {{key(Key::Kind::Enter), Ladder::TermThenKill},
                                                       {press('l'), Ladder::TermThenKill},
                                                       {press('i'), Ladder::IntOnly},
                                                       {press('9'), Ladder::KillNow}};
  for (const auto& [k, ladder] : choices) {
    TopState state = confirming_one();
    const KeyAction action = handle_key(state, k, 10);
    EXPECT_EQ(action.kind, KeyAction::Kind::Execute);
    EXPECT_EQ(action.ladder, ladder);
  }
  TopState state = confirming_one();
  EXPECT_EQ(handle_key(state, key(Key::Kind::Escape), 10).kind, KeyAction::Kind::Discard);
  EXPECT_EQ(state.mode, Mode::Browse);
  EXPECT_EQ(state.status, "cancelled: nothing was signalled");
}

TEST(TopKeys, APlanWithNothingToSignalOffersNoLadderAndReadonlyNoPlan) {
  TopState state = state_with({row(10, 0, GiB, "nvidia-smi")});
  state.preview = KillPreview{};
  state.preview->refused.push_back({10, "root nvidia-smi", "refused: protected process"});
  state.mode = Mode::Confirm;
  EXPECT_EQ(handle_key(state, key(Key::Kind::Enter), 10).kind, KeyAction::Kind::None);
  EXPECT_EQ(state.mode, Mode::Confirm);

  TopState readonly = state_with({row(10, 0, GiB, "a")});
  readonly.readonly = true;
  for (const Key& k : {press('K'), press('x'), key(Key::Kind::Delete), key(Key::Kind::F9)}) {
    EXPECT_EQ(handle_key(readonly, k, 10).kind, KeyAction::Kind::None);
    EXPECT_EQ(readonly.mode, Mode::Browse);
    EXPECT_NE(readonly.status.find("read-only"), std::string::npos);
  }
}

TEST(TopKeys, TheFilterTakesPrintableTextOnlyAndEscapeGivesBackTheOldOne) {
  TopState state = state_with({row(10, 0, GiB, "alpha"), row(20, 0, GiB, "beta")});
  state.order.filter = "al";
  handle_key(state, press('/'), 10);
  EXPECT_EQ(state.mode, Mode::Filter);
  handle_key(state, press('p'), 10);
  handle_key(state, press(0x1b), 10);   // a control character typed: never part of the text
  handle_key(state, press(0x202E), 10);  // a bidirectional override: neither
  handle_key(state, press(U'é'), 10);
  EXPECT_EQ(state.order.filter, "alpé");
  handle_key(state, key(Key::Kind::Backspace), 10);  // one character, both bytes
  EXPECT_EQ(state.order.filter, "alp");
  EXPECT_EQ(pids(state.shown), (std::vector<pid_t>{10}));
  handle_key(state, key(Key::Kind::Escape), 10);
  EXPECT_EQ(state.order.filter, "al");
  EXPECT_EQ(state.mode, Mode::Browse);
}

TEST(TopKeys, TheCursorStaysOnItsProcessWhenTheOrderChanges) {
  TopState state = state_with({row(10, 0, 4 * GiB, "a"), row(20, 0, 2 * GiB, "b"), row(30, 0, GiB, "c")});
  handle_key(state, key(Key::Kind::End), 10);
  ASSERT_EQ(state.current()->row.pid(), 30);
  handle_key(state, press('P'), 10);
  EXPECT_EQ(state.current()->row.pid(), 30);
  EXPECT_EQ(state.cursor, 2u);
  handle_key(state, key(Key::Kind::Home), 10);
  handle_key(state, Key{Key::Kind::Click, 0, 1}, 10);
  EXPECT_EQ(state.current()->row.pid(), 20);
}

std::unique_ptr<Snapshot> one_gpu(std::uint64_t used, std::uint64_t listed) {
  auto snapshot = std::make_unique<Snapshot>();
  snapshot->driver.loaded = true;
  snapshot->driver.driver_version = "550.54.15";
  GpuView gpu;
  gpu.reading.index = 0;
  gpu.reading.name = "NVIDIA H100 80GB HBM3";
  gpu.reading.util_gpu_percent = 35;
  gpu.reading.temperature_c = 45;
  gpu.reading.power_mw = 120000;
  gpu.reading.power_limit_mw = 700000;
  gpu.reading.fan_percent = 40;
  gpu.reading.performance_state = 0;
  gpu.memory.total = 80 * GiB;
  gpu.memory.used = used;
  gpu.memory.attributed = listed;
  gpu.memory.unattributed = used - listed;
  snapshot->gpus.push_back(gpu);
  return snapshot;
}

std::string text_of(const std::vector<Span>& spans) {
  std::string out;
  for (const auto& s : spans) out += s.text;
  return out;
}

TEST(TopLayout, UnattributedMemoryHasAGlyphOfItsOwnWithOrWithoutColour) {
  const auto snapshot = one_gpu(40 * GiB, 20 * GiB);
  EXPECT_EQ(text_of(memory_bar(snapshot->gpus[0], 20, false)), "█████▒▒▒▒▒░░░░░░░░░░");
  EXPECT_EQ(text_of(memory_bar(snapshot->gpus[0], 20, true)), "#####%%%%%..........");
  const auto spans = memory_bar(snapshot->gpus[0], 20, false);
  EXPECT_EQ(spans[1].tone, Tone::Unattributed);
  // The driver's per-context overhead is no leak: no glyph for it.
  const auto small = one_gpu(20 * GiB + (8 << 20), 20 * GiB);
  EXPECT_EQ(text_of(memory_bar(small->gpus[0], 20, false)).find("▒"), std::string::npos);
}

TEST(TopLayout, At80x24EveryLineFitsAndTheKeysAreAtTheBottom) {
  TopState state = state_with({});
  state.snapshot = one_gpu(40 * GiB, 20 * GiB);
  std::vector<TopRow> rows;
  for (pid_t pid = 100; pid < 140; ++pid) {
    TopRow r = row(pid, 0, GiB, "python -m torch.distributed.run --nproc-per-node 8 train.py --config a-long-config.yaml");
    r.container = "docker:4f2a9c1b7d3e";
    r.local_pid = pid - 99;
    rows.push_back(r);
  }
  rows.push_back(worker(200, 0, 100));
  state.rows = rows;
  reorder(state);
  LayoutOptions options;
  options.width = 80;
  options.height = 24;
  keep_cursor_visible(state, table_capacity(state, options));
  const Frame frame = layout_frame(state, options);
  ASSERT_EQ(frame.lines.size(), 24u);
  const std::string text = frame_text(frame);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) EXPECT_LE(display_width(line), 80u) << line;
  EXPECT_NE(text.find("40.0 GiB/80.0 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("20.0 GiB unattributed"), std::string::npos) << text;
  EXPECT_NE(text.find("K end"), std::string::npos) << text;
  EXPECT_EQ(frame.rows_shown, table_capacity(state, options));
  EXPECT_TRUE(frame.lines[static_cast<std::size_t>(frame.table_top)].highlighted);
  // Paging keeps the cursor on screen.
  handle_key(state, key(Key::Kind::PageDown), table_capacity(state, options));
  keep_cursor_visible(state, table_capacity(state, options));
  const Frame paged = layout_frame(state, options);
  EXPECT_TRUE(std::any_of(paged.lines.begin(), paged.lines.end(), [](const FrameLine& l) { return l.highlighted; }));
}

TEST(TopLayout, ANonRootUserSeesWhichRowsAreNotTheirs) {
  TopState state = state_with({});
  state.snapshot = one_gpu(2 * GiB, 2 * GiB);
  state.can_kill_any = false;
  TopRow mine = row(10, 0, GiB, "mine");
  TopRow theirs = row(20, 0, GiB, "theirs");
  theirs.can_act = false;
  theirs.cannot_act = "bob's process: ending it needs root";
  state.rows = {mine, theirs};
  reorder(state);
  LayoutOptions options;
  options.width = 100;
  options.height = 30;
  const std::string text = frame_text(layout_frame(state, options));
  EXPECT_NE(text.find("not root: rows marked ✗ are not yours to end"), std::string::npos) << text;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("theirs") != std::string::npos) {
      EXPECT_NE(line.find("✗"), std::string::npos) << line;
    }
    if (line.find("mine") != std::string::npos) {
      EXPECT_EQ(line.find("✗"), std::string::npos) << line;
    }
  }
}

TEST(TopLayout, TheConfirmationKeepsItsKeysOnScreenHoweverLongThePlan) {
  TopState state = state_with({row(10, 0, GiB, "a")});
  state.snapshot = one_gpu(GiB, GiB);
  state.mode = Mode::Confirm;
  state.preview = KillPreview{};
  for (pid_t pid = 1000; pid < 1040; ++pid) state.preview->signalled.push_back({pid, "ann  python", "descendant of 10 holding /dev/nvidia0"});
  state.preview->memory.push_back("GPU 0: 1.0 GiB expected back (now 1.0 GiB used)");
  LayoutOptions options;
  options.width = 80;
  options.height = 24;
  const std::string text = frame_text(layout_frame(state, options));
  EXPECT_NE(text.find("Enter or l: SIGTERM, then SIGKILL after 10 s"), std::string::npos) << text;
  EXPECT_NE(text.find("more lines"), std::string::npos) << text;
}

TEST(TopCpu, FirstSightIsTheLifetimeAverageThenTheShareSinceTheLastLook) {
  CpuSampler sampler;
  ProcessInfo p;
  p.pid = 42;
  p.start_time_ticks = 7;
  p.cpu_seconds = 10;
  p.cpu_percent = 5;
  const auto t0 = std::chrono::steady_clock::time_point(std::chrono::seconds(100));
  EXPECT_DOUBLE_EQ(sampler.sample(p, t0), 5);
  EXPECT_DOUBLE_EQ(sampler.sample(p, t0), 5);  // its second row in the same round
  sampler.end_round();
  p.cpu_seconds = 10.5;
  EXPECT_DOUBLE_EQ(sampler.sample(p, t0 + std::chrono::seconds(2)), 25);
  sampler.end_round();
  sampler.end_round();  // not seen in a round: forgotten
  p.cpu_seconds = 20;
  EXPECT_DOUBLE_EQ(sampler.sample(p, t0 + std::chrono::seconds(3)), 5);
}

// An AMD GPU beside NVIDIA's: its header after theirs, one row a DRM client (however many
// processes share it) with the busiest engine's share since the last refresh, and a ROCm process
// with VRAM and no client of the GPU as a KFD row. Their GPU column reads "D0".
TEST(TopDrm, EachClientOnceWithItsEngineUseAndKfdProcessesBesideNvidiasGpus) {
  TopState state = state_with({});
  state.snapshot = one_gpu(4 * GiB, 0);
  auto& drm = state.snapshot->drm;
  drm::DrmDevice amd;
  amd.pci_address = "0000:03:00.0";
  amd.driver = "amdgpu";
  amd.vendor = drm::GpuVendor::Amd;
  amd.vram_total = 16 * GiB;
  amd.vram_used = 4 * GiB;
  drm.devices.push_back(amd);
  const auto client = [](std::uint64_t busy_ns) {
    drm::DrmFdinfo record;
    record.driver = "amdgpu";
    record.pdev = "0000:03:00.0";
    record.client_id = 7;
    record.regions.emplace_back().region = "vram";
    record.regions.back().total = GiB;
    record.engines.emplace_back().engine = "gfx";
    record.engines.back().busy_ns = busy_ns;
    record.engines.emplace_back().engine = "compute";
    record.engines.back().busy_ns = busy_ns / 4;
    return record;
  };
  drm.clients.add(500, 4, client(1000000000));
  drm.clients.add(501, 4, client(1000000000));  // a forked worker: the same client
  drm.kfd_nodes = {{46412, "0000:03:00.0"}};
  drm::KfdProcess rocm;
  rocm.pid = 800;
  rocm.vram = {{46412, GiB / 2}};
  drm.kfd_processes.push_back(rocm);

  CpuSampler cpu;
  const auto t0 = std::chrono::steady_clock::time_point(std::chrono::seconds(100));
  std::vector<TopRow> rows = build_rows(*state.snapshot, cpu, RowContext{nullptr, t0}, &state.drm_engines);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].kind, RowKind::DrmClient);
  EXPECT_EQ(rows[0].pid(), 500);
  EXPECT_EQ(rows[0].drm_gpu, 0u);
  EXPECT_EQ(rows[0].gpu_memory, GiB);
  EXPECT_EQ(rows[0].role, "client shared with 501");
  EXPECT_EQ(rows[0].sm_percent, std::nullopt);  // first sight: no interval yet
  EXPECT_EQ(rows[1].kind, RowKind::Kfd);
  EXPECT_EQ(rows[1].pid(), 800);
  EXPECT_EQ(rows[1].gpu_memory, GiB / 2);

  // 2 s later gfx was busy 1.5 s of them: 75%, the busiest engine.
  state.snapshot->drm.clients = drm::ClientLedger();
  state.snapshot->drm.clients.add(500, 4, client(2500000000));
  state.snapshot->drm.clients.add(501, 4, client(2500000000));
  apply_snapshot(state, std::move(state.snapshot), cpu, RowContext{nullptr, t0 + std::chrono::seconds(2)});
  ASSERT_EQ(state.rows.size(), 2u);
  EXPECT_EQ(state.rows[0].sm_percent, 75u);

  LayoutOptions options;
  options.width = 120;
  const std::string text = frame_text(layout_frame(state, options));
  EXPECT_NE(text.find("GPU D0 amd 0000:03:00.0 amdgpu"), std::string::npos) << text;
  EXPECT_NE(text.find("4.0 GiB/16.0 GiB"), std::string::npos) << text;
  EXPECT_LT(text.find("GPU 0 "), text.find("GPU D0 ")) << "NVIDIA's first, as ps shows them";
  EXPECT_NE(text.find("D0      500"), std::string::npos) << text;
  EXPECT_NE(text.find("[client shared with 501]"), std::string::npos) << text;
  EXPECT_NE(text.find("D0      800"), std::string::npos) << text;
}

// xe counts cycles: the share is the cycles' growth against the total cycles' growth. A
// counter that went back (a new client under the same id) gives nothing, as does a client with
// no drm-client-id, which cannot be followed between refreshes.
TEST(TopDrm, CyclesAgainstTotalCyclesAndNoShareFromACounterThatWentBack) {
  const auto xe = [](std::uint64_t id, std::uint64_t cycles, std::uint64_t total) {
    drm::DrmClient client;
    client.pdev = "0000:03:00.0";
    client.client_id = id;
    client.stats.engines.emplace_back().engine = "rcs";
    client.stats.engines.back().cycles = cycles;
    client.stats.engines.back().total_cycles = total;
    return client;
  };
  DrmEngineSampler sampler;
  const auto t0 = std::chrono::steady_clock::time_point(std::chrono::seconds(100));
  EXPECT_EQ(sampler.sample(xe(3, 100, 1000), t0), std::nullopt);
  sampler.end_round();
  EXPECT_EQ(sampler.sample(xe(3, 400, 2000), t0 + std::chrono::seconds(1)), 30u);
  sampler.end_round();
  EXPECT_EQ(sampler.sample(xe(3, 50, 3000), t0 + std::chrono::seconds(2)), std::nullopt);
  sampler.end_round();
  EXPECT_EQ(sampler.sample(xe(0, 100, 1000), t0), std::nullopt);
  EXPECT_EQ(sampler.sample(xe(0, 200, 2000), t0 + std::chrono::seconds(1)), std::nullopt);
}

TEST(TopKillStatus, TheMemoryComesFirstAndAlikeOutcomesShareAnEntry) {
  KillReport report;
  report.settings.signal = "SIGTERM";
  report.targets = {{10, KillOutcome::ExitedAfterSignal, {"SIGTERM"}, 3.0, 'S', "", false, "", "", std::nullopt},
                    {11, KillOutcome::ExitedAfterSignal, {"SIGTERM"}, 5.0, 'S', "", false, "", "", std::nullopt},
                    {12, KillOutcome::Killed, {"SIGTERM", "SIGKILL"}, 10005.0, 'S', "", false, "", "", std::nullopt},
                    {13, KillOutcome::Refused, {}, std::nullopt, 'S', "", false, "", "", std::nullopt}};
  GpuVerification gpu;
  gpu.index = 0;
  gpu.verified = true;
  gpu.freed_bytes = 4 * GiB;
  gpu.verify_ms = 41;
  report.gpus.push_back(gpu);
  EXPECT_EQ(kill_status_line(report),
            "GPU 0: 4.0 GiB verified free in 41 ms · PID 10, 11 exited after SIGTERM · PID 12 killed by SIGKILL");
  EXPECT_FALSE(kill_succeeded(report));  // PID 13 was refused
}

}  // namespace
}  // namespace gpureap
