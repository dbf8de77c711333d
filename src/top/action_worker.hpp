// What the view does besides looking: planning and carrying out a kill, and asking the doctor,
// on a worker thread so that the screen keeps refreshing meanwhile. The kill is kill's own
// pipeline over a fresh snapshot of every process: select -> plan -> pin (before the plan is
// shown, so that only the processes shown can be signalled) -> ladder -> verify with the
// driver. Results come back as events; the loop polls fd().
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "doctor/doctor.hpp"
#include "audit/audit_log.hpp"
#include "kill/interrupt_guard.hpp"
#include "kill/kill_run.hpp"
#include "snapshot/snapshot.hpp"
#include "top/kill_preview.hpp"
#include "top/top_row.hpp"
#include "proc/wake_signal.hpp"

namespace gpureap {

struct ActionSettings {
  SnapshotOptions snapshot;          // scope Everything: the sweep's checks need every process
  std::vector<std::string> protect;  // names added to the built-in protection (configuration)
  const AuditLog* audit = nullptr;   // every signal is recorded here first; none when null
  double timeout_s = 10;             // the ladder's wait before SIGKILL
  double verify_timeout_s = 30;      // how long the driver is given to release the memory
  DoctorOptions doctor;
};

struct ActionEvent {
  enum class Kind { PlanReady, KillFinished, DoctorReady, Failed };
  Kind kind = Kind::Failed;
  KillPreview preview;          // PlanReady
  std::string status;           // KillFinished, Failed: one line for the status bar
  bool succeeded = false;       // KillFinished: every target ended and its memory verified free
  int interrupted_by = 0;       // KillFinished: a signal to gpureap stopped the ladder
  std::optional<unsigned> gpu;  // DoctorReady: the GPU asked about
  std::vector<Finding> findings;     // DoctorReady: that GPU's and the host's
  std::vector<std::string> notes;    // DoctorReady: what could not be checked
};

class ActionWorker {
 public:
  explicit ActionWorker(ActionSettings settings);
  ~ActionWorker();  // finishes the job in progress (a ladder is never abandoned half-way)
  ActionWorker(const ActionWorker&) = delete;
  ActionWorker& operator=(const ActionWorker&) = delete;

  void plan(std::vector<ProcessKey> chosen);  // -> PlanReady (pins held until execute/discard)
  void execute(Ladder ladder);                // the plan last made ready -> KillFinished
  void discard_plan();                        // releases the pins
  void doctor(std::optional<unsigned> gpu);   // -> DoctorReady

  bool busy() const;
  // Stops a ladder under way (and any later one) between its steps: what it stopped or froze
  // is continued. The owner calls it when it must leave (SIGTERM, a closed terminal).
  void interrupt(int signal) { interruption_.request(signal); }
  int fd() const { return wake_.fd(); }
  std::vector<ActionEvent> take_events();

 private:
  struct Job {
    enum class Kind { Plan, Execute, Discard, Doctor } kind = Kind::Plan;
    std::vector<ProcessKey> chosen;
    Ladder ladder = Ladder::TermThenKill;
    std::optional<unsigned> gpu;
  };
  // Between PlanReady and execute: the snapshot the plan was made from, the plan and its pins.
  struct PendingKill {
    std::unique_ptr<Snapshot> snapshot;
    PreparedKill prepared;
  };

  void run();
  void submit(Job job);
  void publish(ActionEvent event);
  SnapshotSource& source();
  ActionEvent make_plan(const std::vector<ProcessKey>& chosen);
  ActionEvent carry_out(Ladder ladder);
  ActionEvent examine(std::optional<unsigned> gpu);

  ActionSettings settings_;
  InterruptRequest interruption_;
  std::unique_ptr<SnapshotSource> source_;  // the worker's own: loaded on first use
  std::optional<PendingKill> pending_;
  WakeSignal wake_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> jobs_;
  std::vector<ActionEvent> events_;
  bool working_ = false;
  bool stop_ = false;
  std::thread thread_;  // last
};

}  // namespace gpureap
