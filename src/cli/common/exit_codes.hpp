// Exit statuses, documented in docs/exit-codes.md. Scripts depend on them: never renumber.
#pragma once

namespace gpureap::exit_code {

inline constexpr int kOk = 0;
inline constexpr int kInternalError = 1;
inline constexpr int kUsage = 2;
inline constexpr int kNoDriverLibrary = 3;   // libnvidia-ml.so.1 not found; holders still listed
inline constexpr int kDriverInitFailed = 4;  // library found, nvmlInit failed (module, mismatch)
inline constexpr int kGpuError = 5;          // at least one GPU reported an error (lost, ...)
// kill
inline constexpr int kNotFreed = 6;          // a target survived, or its memory was not verified free
inline constexpr int kPermissionDenied = 7;  // a target belongs to someone we may not signal
inline constexpr int kRefused = 8;           // a target was refused (identity, protected, self, PID 1)
inline constexpr int kNothingSelected = 9;   // the selection matched no process
inline constexpr int kAborted = 10;          // the user declined at the confirmation prompt (kill, doctor --fix)
// kill: SIGINT, SIGTERM, SIGHUP or SIGQUIT stopped the ladder; what it had stopped was continued.
// The shell's convention for a command ended by a signal: 130 (INT), 143 (TERM), 129 (HUP), 131 (QUIT).
constexpr int interrupted_by(int signal) { return 128 + signal; }
// doctor: 0 healthy, 1 warnings, 2 critical findings (its own meaning of 1 and 2: health
// checks test exactly these), and:
inline constexpr int kDoctorCouldNotRun = 11;  // bad option or unreadable input: no diagnosis made

// export: 0 when a signal stopped it, 2 a bad option or web-config, and:
inline constexpr int kExportCannotServe = 12;  // the address is in use or cannot be bound, TLS files refused, no HTTP module

// run: the command's own status (128 + signal when a signal ended it), except these, chosen as
// timeout(1) and env(1) do so that a wrapper's failure is told from the command's.
inline constexpr int kRunLeftBehind = 123;      // a process of the job survived, or its GPU memory was not verified free
inline constexpr int kRunHung = 124;            // --hang-timeout: the job hung and was ended
inline constexpr int kRunCannotRun = 125;       // gpureap run itself failed: bad option, no cgroup entry, fork
inline constexpr int kRunReportNotWritten = 125;  // the job ran, but its --json or --report could not be written
inline constexpr int kRunCannotExecute = 126;   // the command was found but could not be executed
inline constexpr int kRunCommandNotFound = 127;

// fleet: 0, 1, 2 as above; 5 when a host is down, its driver did not load or a GPU is lost (the
// rest is still listed); and, before anything is listed:
inline constexpr int kFleetUnreachable = 20;  // no connection, TLS refused, or no answer within --timeout
inline constexpr int kFleetQueryFailed = 21;  // the server refused the credentials or failed the query
inline constexpr int kFleetBadAnswer = 22;    // not the API's JSON, not a vector, or larger than the bound
inline constexpr int kFleetNoHosts = 23;      // no host exports gpureap series (that --host/--gpu keep)

}  // namespace gpureap::exit_code
