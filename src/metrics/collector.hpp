// Where the exporter's metrics come from (exporter/exporter.hpp serves them):
//   HostCollector       `gpureap export`: a snapshot, doctor's quick checks and the Xid
//                       counters, collected when a scrape asks;
//   PublishedCollector  a program with a loop of its own (`watch`): it publishes each round's
//                       families and scrapes get the latest, with no collection of their own.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "doctor/doctor.hpp"
#include "metrics/collection_errors.hpp"
#include "metrics/metric_set.hpp"
#include "metrics/snapshot_metrics.hpp"
#include "metrics/xid_tracker.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

class Collector {
 public:
  virtual ~Collector() = default;
  // One collection. The exporter calls it on a thread of its own, one call at a time, and
  // never keeps a scrape waiting beyond its deadline for it: it may block (a hung driver) or
  // throw (then the last good collection is served, marked stale).
  virtual MetricSet collect() = 0;
  // Whether the host has changed since the last collection in a way it can tell at once
  // (a holder kept from the kernel's events came or went): a younger collection is then not
  // served from the cache. Called from any thread.
  virtual bool changed_since_collection() { return false; }
};

// default_snapshot_options() in the Holders scope, as `ps` reads: the processes holding GPU
// device files with their trees, zombies and unreadable ones in full; one look at the others.
// The holders are kept from the kernel's events between reconciliation walks where it can
// give them (snapshot/holder_events.hpp).
SnapshotOptions collection_snapshot_options();

struct HostCollectorOptions {
  SnapshotOptions snapshot = collection_snapshot_options();
  SnapshotMetricsOptions metrics;
  bool kernel_log = true;  // count Xid events (--no-kernel-log: not)
  XidTrackerOptions xid;
  // Families added to every collection after gpureap's own (another program's counters).
  std::function<void(MetricSet&)> extra_families;
  // Told once per new problem (the driver, the kernel log): one line for a person.
  std::function<void(const std::string&)> on_problem;
};

// The doctor checks a scrape (or a watch's full scan) can afford, for diagnose_once: nothing
// that sleeps or re-measures (a release in progress then reads as a leak for the scrapes it
// lasts), no leftover shared memory (it reads every process's maps), no kernel log (the Xid
// counters read it incrementally).
DoctorOptions quick_doctor_options();

// gpureap_doctor_finding from doctor's quick checks over `snapshot` (which loads the details of
// zombies and their parents into it): what export and watch serve alike.
void add_quick_finding_metrics(Snapshot& snapshot, MetricSet& metrics);

class HostCollector : public Collector {
 public:
  explicit HostCollector(HostCollectorOptions options);
  ~HostCollector() override;

  MetricSet collect() override;
  bool changed_since_collection() override;

 private:
  HostCollectorOptions options_;
  SnapshotSource source_;
  std::optional<XidTracker> xids_;
  CollectionErrors errors_;
  bool fallback_told_ = false;  // why the holders are walked, told once
};

class PublishedCollector : public Collector {
 public:
  void publish(MetricSet metrics);
  // What was published last (nothing before the first publish).
  MetricSet collect() override;

 private:
  std::mutex mutex_;
  MetricSet latest_;
};

}  // namespace gpureap
