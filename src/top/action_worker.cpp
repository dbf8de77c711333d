#include "top/action_worker.hpp"

#include <fmt/format.h>

#include "text/sanitize.hpp"

namespace gpureap {

ActionWorker::ActionWorker(ActionSettings settings) : settings_(std::move(settings)), thread_([this] { run(); }) {}

ActionWorker::~ActionWorker() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void ActionWorker::plan(std::vector<ProcessKey> chosen) { submit({Job::Kind::Plan, std::move(chosen), {}, {}}); }
void ActionWorker::execute(Ladder ladder) { submit({Job::Kind::Execute, {}, ladder, {}}); }
void ActionWorker::discard_plan() { submit({Job::Kind::Discard, {}, {}, {}}); }
void ActionWorker::doctor(std::optional<unsigned> gpu) { submit({Job::Kind::Doctor, {}, {}, gpu}); }

bool ActionWorker::busy() const {
  std::lock_guard lock(mutex_);
  return working_ || !jobs_.empty();
}

std::vector<ActionEvent> ActionWorker::take_events() {
  wake_.drain();
  std::lock_guard lock(mutex_);
  return std::exchange(events_, {});
}

void ActionWorker::submit(Job job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  changed_.notify_all();
}

void ActionWorker::publish(ActionEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  wake_.notify();
}

SnapshotSource& ActionWorker::source() {
  if (!source_) source_ = std::make_unique<SnapshotSource>(settings_.snapshot);
  return *source_;
}

void ActionWorker::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      working_ = false;
      // Stopping waits for the queue: an execute already asked for is carried out, never
      // left with processes pinned and nothing said.
      changed_.wait(lock, [this] { return !jobs_.empty() || stop_; });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      working_ = true;
    }
    ActionEvent event;
    try {
      switch (job.kind) {
        case Job::Kind::Plan: event = make_plan(job.chosen); break;
        case Job::Kind::Execute: event = carry_out(job.ladder); break;
        case Job::Kind::Discard: pending_.reset(); continue;
        case Job::Kind::Doctor: event = examine(job.gpu); break;
      }
    } catch (const std::exception& error) {
      pending_.reset();
      event = ActionEvent{};
      event.kind = ActionEvent::Kind::Failed;
      event.status = "failed: " + sanitize_for_terminal(error.what());
    }
    publish(std::move(event));
  }
}

ActionEvent ActionWorker::make_plan(const std::vector<ProcessKey>& chosen) {
  pending_.reset();
  PendingKill pending;
  pending.snapshot = source().take();
  std::vector<std::string> notes;
  const Selection selection = select_for_view(*pending.snapshot, chosen, notes);
  pending.prepared = prepare_kill(*pending.snapshot, selection, kill_policy(*pending.snapshot, settings_.protect));
  ActionEvent event;
  event.kind = ActionEvent::Kind::PlanReady;
  event.preview = preview_plan(pending.prepared.plan, std::move(notes));
  pending_ = std::move(pending);
  return event;
}

ActionEvent ActionWorker::carry_out(Ladder ladder) {
  ActionEvent event;
  if (!pending_) {
    event.kind = ActionEvent::Kind::Failed;
    event.status = "no plan to carry out";
    return event;
  }
  PendingKill pending = std::move(*pending_);
  pending_.reset();
  const Snapshot& snapshot = *pending.snapshot;
  CarryOutOptions how;
  how.execution.engine = escalation_for(ladder, settings_.timeout_s, snapshot.table.options().proc_root);
  how.execution.engine.interruption = interruption_.interruption();  // never signal handlers from this thread
  how.verify_timeout_s = settings_.verify_timeout_s;
  how.audit = settings_.audit;
  KillReport report = planned_report(pending.prepared.plan, how.execution);
  carry_out_kill(pending.prepared, source(), snapshot, how, report);
  event.kind = ActionEvent::Kind::KillFinished;
  event.status = kill_status_line(report);
  event.succeeded = kill_succeeded(report);
  event.interrupted_by = report.interrupted_by;
  return event;
}

ActionEvent ActionWorker::examine(std::optional<unsigned> gpu) {
  auto snapshot = source().take();
  const Diagnosis diagnosis = diagnose(source(), *snapshot, settings_.doctor);
  ActionEvent event;
  event.kind = ActionEvent::Kind::DoctorReady;
  event.gpu = gpu;
  for (const auto& finding : diagnosis.findings) {
    if (!gpu || !finding.gpu || finding.gpu == gpu) event.findings.push_back(finding);
  }
  event.notes = diagnosis.notes;
  return event;
}

}  // namespace gpureap
