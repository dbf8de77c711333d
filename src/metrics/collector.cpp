#include "metrics/collector.hpp"

#include <system_error>

#include "doctor/doctor.hpp"
#include "metrics/holder_event_metrics.hpp"
#include "metrics/snapshot_metrics.hpp"

namespace gpureap {
namespace {

// Why the driver could not be read in full this time, or "" when it was.
std::string driver_problem(const Snapshot& snapshot) {
  const DriverStatus& driver = snapshot.driver;
  if (!driver.loaded) return "the NVML library is not usable: " + driver.message;
  if (driver.count_error) return "the driver could not count the GPUs: " + driver.count_error->message;
  for (const auto& gpu : snapshot.gpus) {
    if (gpu.reading.error) return "GPU " + std::to_string(gpu.reading.index) + ": " + gpu.reading.error->message;
    if (!gpu.reading.processes_complete) {
      return "GPU " + std::to_string(gpu.reading.index) + ": its process list could not be read";
    }
  }
  return {};
}

}  // namespace

SnapshotOptions collection_snapshot_options() {
  SnapshotOptions options = default_snapshot_options();
  options.proc.scope = ProcScanScope::Holders;
  options.holder_events = std::make_shared<HolderEvents>(300);
  return options;
}

DoctorOptions quick_doctor_options() {
  DoctorOptions options;
  options.settle_seconds = 0;
  options.no_kernel_log = true;
  options.check_ipc = false;
  options.check_run_supervisors = false;
  options.check_mps_waiting = false;
  return options;
}

void add_quick_finding_metrics(Snapshot& snapshot, MetricSet& metrics) {
  add_finding_metrics(diagnose_once(snapshot, quick_doctor_options()).findings, metrics);
}

HostCollector::HostCollector(HostCollectorOptions options)
    : options_(std::move(options)), source_(options_.snapshot), errors_(options_.on_problem) {
  options_.xid.proc_root = options_.snapshot.proc.proc_root;
  if (options_.kernel_log) xids_.emplace(options_.xid);
}

HostCollector::~HostCollector() = default;

MetricSet HostCollector::collect() {
  MetricSet metrics;
  std::unique_ptr<Snapshot> snapshot;
  try {
    snapshot = source_.take();
  } catch (const std::system_error& e) {  // /proc itself could not be opened
    errors_.note(CollectionSource::Proc, std::string("cannot read /proc: ") + e.what());
    errors_.add_metrics(metrics);
    return metrics;
  }
  errors_.note(CollectionSource::Proc, "");
  errors_.note(CollectionSource::Nvml, driver_problem(*snapshot));
  add_snapshot_metrics(*snapshot, options_.metrics, metrics);
  add_holder_event_metrics(*snapshot, metrics);
  if (snapshot->holder_events && !snapshot->holder_events->active && !fallback_told_ && options_.on_problem) {
    fallback_told_ = true;
    options_.on_problem(snapshot->holder_events->fallback_reason);
  }
  if (snapshot->holder_events && options_.on_problem) {
    for (const std::string& note : snapshot->holder_events->missed_notes) {
      options_.on_problem("a holder the events had missed, found by the walk: " + note);
    }
  }
  add_quick_finding_metrics(*snapshot, metrics);
  if (xids_) {
    xids_->update(*snapshot);
    errors_.note(CollectionSource::KernelLog, xid_problem(*xids_));
    xids_->add_metrics(metrics);
  }
  errors_.add_metrics(metrics);
  if (options_.extra_families) options_.extra_families(metrics);
  return metrics;
}

// HolderEvents has a lock of its own: asking while a collection runs is safe.
bool HostCollector::changed_since_collection() {
  return options_.snapshot.holder_events != nullptr && options_.snapshot.holder_events->changed_since_scan();
}

void PublishedCollector::publish(MetricSet metrics) {
  std::lock_guard lock(mutex_);
  latest_ = std::move(metrics);
}

MetricSet PublishedCollector::collect() {
  std::lock_guard lock(mutex_);
  return latest_;
}

}  // namespace gpureap
