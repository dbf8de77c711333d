#include "metrics/collector.hpp"

#include <system_error>

#include "doctor/doctor.hpp"
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
  return options;
}

DoctorOptions quick_doctor_options() {
  DoctorOptions options;
  options.settle_seconds = 0;
  options.no_kernel_log = true;
  options.check_ipc = false;
  return options;
}

HostCollector::HostCollector(HostCollectorOptions options)
    : options_(std::move(options)), source_(options_.snapshot) {
  options_.xid.proc_root = options_.snapshot.proc.proc_root;
  if (options_.kernel_log) xids_.emplace(options_.xid);
}

HostCollector::~HostCollector() = default;

void HostCollector::report(const std::string& source, const std::string& problem) {
  std::string& last = last_problem_[source];
  if (problem == last) return;
  last = problem;
  if (!problem.empty() && options_.on_problem) options_.on_problem(problem);
}

void HostCollector::add_error_metrics(MetricSet& metrics) const {
  auto& errors = metrics.family("gpureap_collection_errors_total", MetricType::Counter,
                                "Collections in which a source could not be read in full.");
  errors.add({{"source", "nvml"}}, static_cast<double>(nvml_errors_));
  errors.add({{"source", "proc"}}, static_cast<double>(proc_errors_));
  errors.add({{"source", "kernel-log"}}, static_cast<double>(kernel_log_errors_));
}

MetricSet HostCollector::collect() {
  MetricSet metrics;
  std::unique_ptr<Snapshot> snapshot;
  try {
    snapshot = source_.take();
  } catch (const std::system_error& e) {  // /proc itself could not be opened
    ++proc_errors_;
    report("proc", std::string("cannot read /proc: ") + e.what());
    add_error_metrics(metrics);
    return metrics;
  }
  const std::string problem = driver_problem(*snapshot);
  if (!problem.empty()) ++nvml_errors_;
  report("nvml", problem);
  const Diagnosis diagnosis = diagnose(source_, *snapshot, quick_doctor_options());
  add_snapshot_metrics(*snapshot, options_.metrics, metrics);
  add_finding_metrics(diagnosis.findings, metrics);
  if (xids_) {
    if (!xids_->update(*snapshot)) ++kernel_log_errors_;
    report("kernel-log", xids_->last_error().empty() ? "" : "Xid events not counted: " + xids_->last_error());
    xids_->add_metrics(metrics);
  }
  add_error_metrics(metrics);
  if (options_.extra_families) options_.extra_families(metrics);
  return metrics;
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
