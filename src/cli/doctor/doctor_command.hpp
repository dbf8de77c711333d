// The `doctor` subcommand: diagnose, show (text or JSON), optionally fix after asking, and
// exit 0 healthy / 1 warnings / 2 critical so that health checks and cron jobs can use it.
#pragma once

#include <string>
#include <vector>

#include "cli/common/cli11_declarations.hpp"

namespace gpureap {

struct DoctorCommandOptions {
  bool json = false;
  bool wide = false;  // no line fitted to the terminal's width
  bool fix = false;
  bool yes = false;
  std::vector<std::string> only;
  bool allow_reset = false;
  std::string kernel_log;
  bool no_kernel_log = false;
  // Time options as typed; the duration parser checks them and sets the numbers below.
  std::string since;
  std::string settle = "3";
  std::string tolerance_mib;  // "": the default rule
  std::string timeout = "10";
  std::string verify_timeout = "30";
  double since_s = -1;  // < 0: not given
  double settle_s = 3;
  double tolerance_mib_value = -1;  // < 0: the default rule
  double timeout_s = 10;
  double verify_timeout_s = 30;
  std::string color = "auto";
  std::string audit_log;    // "" = $GPUREAP_AUDIT_LOG, else the configuration's, else none
  std::string ipc_min_age;  // "" = DoctorOptions' default (10 min)
  double ipc_min_age_s = -1;  // < 0: not given
};

CLI::App* add_doctor_command(CLI::App& app, DoctorCommandOptions& options);
int run_doctor(const DoctorCommandOptions& options);

}  // namespace gpureap
