// The bounds of every time and size option, in one place (README "Text output and time
// options" and each command's --help state them). A value outside is a usage error.
#pragma once

namespace gpureap::option_limits {

// kill --timeout/--verify-timeout, doctor --timeout/--verify-timeout: an hour is far beyond
// any graceful shutdown or driver release.
inline constexpr double kMaxSignalTimeoutSeconds = 3600;
inline constexpr double kMaxVerifyTimeoutSeconds = 3600;
inline constexpr double kMaxSinceSeconds = 365 * 86400.0;  // doctor --since
inline constexpr double kMaxSettleSeconds = 600;           // doctor --settle
inline constexpr double kMaxToleranceMib = 1024 * 1024;    // doctor --tolerance-mib: 1 TiB
inline constexpr double kMaxIpcMinAgeSeconds = 30 * 86400.0;  // doctor --ipc-min-age
inline constexpr double kMinWatchSeconds = 0.1;            // ps --watch
inline constexpr double kMaxWatchSeconds = 86400;

// run --poll-interval: below 50 ms the driver reads cost more than they tell; --hang-timeout
// needs a few looks before it can call a job idle, and a week is beyond any job's silence.
inline constexpr double kMinPollIntervalSeconds = 0.05;
inline constexpr double kMaxPollIntervalSeconds = 60;
inline constexpr double kMinHangTimeoutSeconds = 1;
inline constexpr double kMaxHangTimeoutSeconds = 7 * 86400.0;

// export --max-scrapes: each waiting scrape holds a thread; export --cache: beyond a minute a
// dashboard would show memory long freed as still in use.
inline constexpr double kMaxScrapes = 1000;
inline constexpr double kMaxExportCacheSeconds = 60;

// export --reconcile, top --reconcile: the walk of /proc that checks the holders kept from
// events. A day: what the events missed (a descriptor passed over a socket) is not left longer.
inline constexpr double kMaxReconcileSeconds = 24 * 3600;

// fleet --timeout: every query together; a Prometheus that needs minutes for these is broken.
inline constexpr double kMinFleetTimeoutSeconds = 0.1;
inline constexpr double kMaxFleetTimeoutSeconds = 300;

}  // namespace gpureap::option_limits
