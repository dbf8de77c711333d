// What kill expects back on an AMD or Intel GPU, and when it counts it as released: a client
// held by targets alone is expected to go, one a spared process also holds is expected to stay;
// only private memory is expected back; a pasid (amdgpu before 5.19) may be reused.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "drm/fdinfo_record.hpp"
#include "kill/drm_verification.hpp"
#include "kill/kill_plan.hpp"

namespace gpureap::kill_drm_release_test {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;
const std::string kPci = "0000:03:00.0";

drm::DrmFdinfo client_record(std::uint64_t id, const std::string& vram, const std::string& shared = "") {
  std::string text = "drm-driver:\tamdgpu\ndrm-pdev:\t" + kPci + "\ndrm-client-id:\t" + std::to_string(id) +
                     "\ndrm-total-vram:\t" + vram + "\n";
  if (!shared.empty()) text += "drm-shared-vram:\t" + shared + "\n";
  return *drm::parse_drm_fdinfo(text);
}

drm::DrmFdinfo legacy_record(std::uint64_t pasid, std::uint64_t vram_kib) {
  return *drm::parse_drm_fdinfo("pdev:\t" + kPci + "\npasid:\t" + std::to_string(pasid) + "\nvram mem:\t" +
                                std::to_string(vram_kib) + " kB\ngtt mem:\t0 kB\ncpu mem:\t0 kB\n");
}

drm::DrmReading amd_reading(std::uint64_t used) {
  drm::DrmReading reading;
  drm::DrmDevice device;
  device.pci_address = kPci;
  device.driver = "amdgpu";
  device.vendor = drm::GpuVendor::Amd;
  device.vram_total = 16 * kGiB;
  device.vram_used = used;
  reading.devices.push_back(device);
  return reading;
}

PlannedTarget target(pid_t pid) {
  PlannedTarget t;
  t.pid = pid;
  t.present = true;
  t.state = 'S';
  return t;
}

// A trainer (100) and its forked worker (101) share client 7 (2 GiB, 256 MiB of it shared with
// the bystander); the bystander (200) has client 9: 1 GiB of its own and the 256 MiB it
// imported, which drm-total counts in both clients and the device's figure once.
Snapshot trainer_and_bystander(std::uint64_t used) {
  Snapshot snapshot;
  snapshot.drm = amd_reading(used);
  snapshot.drm.clients.add(100, 5, client_record(7, "2 GiB", "256 MiB"));
  snapshot.drm.clients.add(101, 5, client_record(7, "2 GiB", "256 MiB"));
  snapshot.drm.clients.add(200, 4, client_record(9, "1280 MiB", "256 MiB"));
  return snapshot;
}

TEST(KillDrmPlan, ClientsHeldByTargetsAloneAreExpectedToGoWithTheirPrivateMemory) {
  const Snapshot snapshot = trainer_and_bystander(3 * kGiB + 128 * kMiB);
  KillPlan plan;
  plan.targets = {target(100), target(101)};
  plan_drm_gpus(plan, snapshot);
  ASSERT_EQ(plan.drm_gpus.size(), 1u);
  const auto& gpu = plan.drm_gpus[0];
  EXPECT_EQ(gpu.pci_address, kPci);
  EXPECT_EQ(gpu.vendor, "amd");
  ASSERT_EQ(gpu.ending.size(), 1u);
  EXPECT_EQ(gpu.ending[0].identity, 7u);
  EXPECT_EQ(gpu.ending[0].holders, (std::vector<pid_t>{100, 101}));
  EXPECT_TRUE(gpu.kept.empty());
  EXPECT_EQ(gpu.expected_free_bytes, 2 * kGiB - 256 * kMiB);
  EXPECT_EQ(gpu.others_bytes, 1280 * kMiB);
  EXPECT_EQ(gpu.baseline_used, 3 * kGiB + 128 * kMiB);
  EXPECT_EQ(gpu.target_pids, (std::vector<pid_t>{100, 101}));
  EXPECT_EQ(plan.targets[0].drm_memory.at(kPci), 2 * kGiB);
}

TEST(KillDrmPlan, AClientASparedProcessAlsoHoldsIsExpectedToStay) {
  const Snapshot snapshot = trainer_and_bystander(3 * kGiB);
  KillPlan plan;
  plan.targets = {target(100), target(101)};
  plan.targets[1].refusal = Refusal::Protected;  // the worker is not signalled
  plan_drm_gpus(plan, snapshot);
  ASSERT_EQ(plan.drm_gpus.size(), 1u);
  EXPECT_TRUE(plan.drm_gpus[0].ending.empty());
  ASSERT_EQ(plan.drm_gpus[0].kept.size(), 1u);
  EXPECT_EQ(plan.drm_gpus[0].kept[0].outside_holders, (std::vector<pid_t>{101}));
  EXPECT_EQ(plan.drm_gpus[0].expected_free_bytes, 0u);
  // While the spared worker holds it, what the trainer held is not back: the worker is named.
  drm::DrmReading now = amd_reading(3 * kGiB);
  now.clients.add(101, 5, client_record(7, "2 GiB", "256 MiB"));
  const auto state = drm_release_state(plan.drm_gpus[0], now);
  EXPECT_FALSE(state.released);
  EXPECT_EQ(state.still_held_by, (std::vector<pid_t>{101}));
}

TEST(KillDrmPlan, NoTargetHoldingAClientPlansNoDrmGpu) {
  const Snapshot snapshot = trainer_and_bystander(3 * kGiB);
  KillPlan plan;
  plan.targets = {target(300)};
  plan_drm_gpus(plan, snapshot);
  EXPECT_TRUE(plan.drm_gpus.empty());
}

KillPlan planned_trainer(const Snapshot& snapshot) {
  KillPlan plan;
  plan.targets = {target(100), target(101)};
  plan_drm_gpus(plan, snapshot);
  return plan;
}

TEST(KillDrmRelease, NotReleasedWhileAnyProcessStillHoldsTheClient) {
  const KillPlan plan = planned_trainer(trainer_and_bystander(3 * kGiB));
  drm::DrmReading now = amd_reading(1 * kGiB);  // the figure dropped already
  now.clients.add(101, 5, client_record(7, "2 GiB", "256 MiB"));  // the worker lives on
  now.clients.add(200, 4, client_record(9, "1280 MiB", "256 MiB"));
  const auto state = drm_release_state(plan.drm_gpus[0], now);
  EXPECT_FALSE(state.released);
  EXPECT_EQ(state.still_held_by, (std::vector<pid_t>{101}));
}

TEST(KillDrmRelease, NotReleasedUntilTheDriversFigureDropsByThePrivateMemory) {
  const KillPlan plan = planned_trainer(trainer_and_bystander(3 * kGiB + 128 * kMiB));
  drm::DrmReading now = amd_reading(3 * kGiB + 128 * kMiB);  // clients gone, buffers not yet freed
  now.clients.add(200, 4, client_record(9, "1280 MiB", "256 MiB"));
  EXPECT_FALSE(drm_release_state(plan.drm_gpus[0], now).released);
  now.devices[0].vram_used = 1 * kGiB + 128 * kMiB + 256 * kMiB;  // the shared part stays with its importer
  const auto state = drm_release_state(plan.drm_gpus[0], now);
  EXPECT_TRUE(state.released);
  EXPECT_EQ(state.freed_bytes, 2 * kGiB - 256 * kMiB);
}

TEST(KillDrmRelease, ABystanderGrowingMeanwhileIsAllowedFor) {
  const KillPlan plan = planned_trainer(trainer_and_bystander(3 * kGiB));
  drm::DrmReading now = amd_reading(3 * kGiB - 256 * kMiB);  // dropped by 1.75 GiB, the bystander grew by 1 GiB
  now.clients.add(200, 4, client_record(9, "2304 MiB", "256 MiB"));
  EXPECT_FALSE(drm_release_state(plan.drm_gpus[0], now).released);
  now.devices[0].vram_used = 2 * kGiB + 256 * kMiB;  // 1.75 GiB freed, 1 GiB grown
  const auto state = drm_release_state(plan.drm_gpus[0], now);
  EXPECT_TRUE(state.released);
  EXPECT_EQ(state.freed_bytes, 2 * kGiB - 256 * kMiB);
}

// A /proc tree in which PID 100 holds /dev/kfd (descriptor 7) when `holds_kfd`, and PID 101
// holds nothing: what tells a KFD context's owner from a process that got its PID later.
ProcessTable proc_table(const std::string& root, bool holds_kfd) {
  namespace fs = std::filesystem;
  fs::remove_all(root);
  for (const int pid : {100, 101}) {
    const std::string dir = root + "/" + std::to_string(pid);
    fs::create_directories(dir + "/fd");
    std::ofstream(dir + "/stat") << pid << " (python3) S 1 100 100 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 30000 0 0\n";
    if (pid == 100 && holds_kfd) fs::create_symlink("/dev/kfd", dir + "/fd/7");
  }
  ProcScanOptions options;
  options.proc_root = root;
  return ProcessTable::scan(options);
}

TEST(KillDrmRelease, AKfdContextStillListedHoldsTheRelease) {
  Snapshot snapshot = trainer_and_bystander(3 * kGiB);
  const std::string root = ::testing::TempDir() + "kill-drm-proc-" + std::to_string(::getpid());
  snapshot.table = proc_table(root, /*holds_kfd=*/true);
  snapshot.drm.kfd_nodes.push_back(drm::KfdNode{46412, kPci});
  snapshot.drm.kfd_processes.push_back(drm::KfdProcess{100, 32784, {{46412, 1 * kGiB}}});
  const KillPlan plan = planned_trainer(snapshot);
  ASSERT_EQ(plan.drm_gpus[0].kfd_pids, (std::vector<pid_t>{100}));
  EXPECT_EQ(plan.drm_gpus[0].expected_free_bytes, 2 * kGiB - 256 * kMiB);  // counted through its client already
  drm::DrmReading now = amd_reading(1 * kGiB + 256 * kMiB);  // the bystander, and the shared part
  now.clients.add(200, 4, client_record(9, "1280 MiB", "256 MiB"));
  now.kfd_nodes = snapshot.drm.kfd_nodes;
  now.kfd_processes = snapshot.drm.kfd_processes;
  const auto state = drm_release_state(plan.drm_gpus[0], now);
  EXPECT_FALSE(state.released);
  EXPECT_EQ(state.kfd_left, (std::vector<pid_t>{100}));
  now.kfd_processes.clear();
  EXPECT_TRUE(drm_release_state(plan.drm_gpus[0], now).released);

  // The same context listed under PID 100 while the process there holds no /dev/kfd (its PID
  // reused, the context kept by another descriptor): not that process's, and not waited for.
  snapshot.table = proc_table(root, /*holds_kfd=*/false);
  EXPECT_TRUE(planned_trainer(snapshot).drm_gpus[0].kfd_pids.empty());
  std::filesystem::remove_all(root);
}

TEST(KillDrmRelease, SharedMemoryNoOpenClientShowsIsNotExcused) {
  // A client whose 2 GiB are all marked shared, kept open unseen after the kill (in flight in a
  // unix socket): its memory is all still in the figure, and no open client shows it as shared.
  Snapshot snapshot;
  snapshot.drm = amd_reading(2 * kGiB + 128 * kMiB);
  snapshot.drm.clients.add(100, 5, client_record(7, "2 GiB", "2 GiB"));
  const KillPlan plan = planned_trainer(snapshot);
  EXPECT_EQ(plan.drm_gpus[0].expected_free_bytes, 0u);
  drm::DrmReading now = amd_reading(2 * kGiB + 128 * kMiB);
  EXPECT_FALSE(drm_release_state(plan.drm_gpus[0], now).released);
  // An importer that keeps it shows it as shared: then the 2 GiB staying is what was expected.
  now.clients.add(300, 4, client_record(11, "2 GiB", "2 GiB"));
  EXPECT_TRUE(drm_release_state(plan.drm_gpus[0], now).released);
}

TEST(KillDrmRelease, AnotherClientEndingMeanwhileIsNotTakenForTheTargets) {
  const KillPlan plan = planned_trainer(trainer_and_bystander(3 * kGiB + 128 * kMiB));
  drm::DrmReading now = amd_reading(2 * kGiB + 128 * kMiB);  // dropped by 1 GiB: the bystander's
  const auto state = drm_release_state(plan.drm_gpus[0], now);  // the trainer's client is gone, held unseen
  EXPECT_FALSE(state.released);
}

TEST(KillDrmRelease, FreesInFlightBeforeTheKillAreNotTakenForTheTargets) {
  // 1 GiB of an earlier client was still being freed when the snapshot was taken.
  const KillPlan plan = planned_trainer(trainer_and_bystander(4 * kGiB + 128 * kMiB));
  EXPECT_EQ(plan.drm_gpus[0].unexplained_base, 1 * kGiB + 128 * kMiB - 256 * kMiB);  // its shared part counted twice
  drm::DrmReading now = amd_reading(3 * kGiB + 128 * kMiB);  // that 1 GiB went; the trainer's not yet
  now.clients.add(200, 4, client_record(9, "1280 MiB", "256 MiB"));
  const auto state = drm_release_state(plan.drm_gpus[0], now);
  EXPECT_FALSE(state.released);
  EXPECT_TRUE(state.unattributable);
  now.devices[0].vram_used = 1 * kGiB + 128 * kMiB + 256 * kMiB;  // both gone; the shared part stays
  EXPECT_TRUE(drm_release_state(plan.drm_gpus[0], now).released);
}

TEST(KillDrmRelease, AReusedPasidOfANewProcessIsNotTheEndedClient) {
  Snapshot snapshot;
  snapshot.drm = amd_reading(1 * kGiB + 128 * kMiB);
  snapshot.drm.clients.add(100, 5, legacy_record(32784, 1048576));  // 1 GiB, amdgpu 5.14-5.18
  const KillPlan plan = planned_trainer(snapshot);
  ASSERT_EQ(plan.drm_gpus[0].ending.size(), 1u);
  EXPECT_TRUE(plan.drm_gpus[0].ending[0].by_pasid);
  drm::DrmReading now = amd_reading(1 * kGiB + 128 * kMiB);  // a new process got the pasid and 1 GiB
  now.clients.add(300, 3, legacy_record(32784, 1048576));
  const auto state = drm_release_state(plan.drm_gpus[0], now);
  EXPECT_TRUE(state.still_held_by.empty());
  EXPECT_TRUE(state.released);  // the newcomer's 1 GiB is growth of others
}

TEST(KillDrmRelease, WithoutADeviceFigureTheReleaseIsNeverCalledVerified) {
  Snapshot snapshot = trainer_and_bystander(0);
  snapshot.drm.devices[0].vram_used.reset();  // i915, xe
  snapshot.drm.devices[0].driver = "xe";
  const KillPlan plan = planned_trainer(snapshot);
  drm::DrmReading now = snapshot.drm;
  now.clients = drm::ClientLedger();
  now.clients.add(200, 4, client_record(9, "1280 MiB", "256 MiB"));
  const auto state = drm_release_state(plan.drm_gpus[0], now);
  EXPECT_FALSE(state.released);
  EXPECT_TRUE(state.no_figure);
  VerifyOptions options;
  options.timeout = std::chrono::milliseconds(60000);  // not waited for: nothing more can show
  const auto results = verify_drm_release(plan, [&]() { return std::optional<drm::DrmReading>(now); }, options);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].verified);
  EXPECT_TRUE(results[0].unverifiable);
  EXPECT_NE(results[0].message.find("cannot be verified"), std::string::npos) << results[0].message;
}

TEST(KillDrmRelease, TimeoutNamesWhoStillHoldsTheClient) {
  const KillPlan plan = planned_trainer(trainer_and_bystander(3 * kGiB));
  drm::DrmReading now = amd_reading(3 * kGiB);
  now.clients.add(101, 5, client_record(7, "2 GiB", "256 MiB"));
  VerifyOptions options;
  options.timeout = std::chrono::milliseconds(0);
  const auto results = verify_drm_release(plan, [&]() { return std::optional<drm::DrmReading>(now); }, options);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].verified);
  EXPECT_EQ(results[0].still_held_by, (std::vector<pid_t>{101}));
  EXPECT_NE(results[0].message.find("still held by PID 101"), std::string::npos) << results[0].message;
  EXPECT_NE(results[0].message.find("`gpureap kill 101`"), std::string::npos) << results[0].message;
}

}  // namespace gpureap::kill_drm_release_test
