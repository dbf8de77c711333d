// `gpureap run` as a command wrapper people type: its options end at the command's first word,
// its report is a line of its own and an error when it cannot be written, a job's early leak is
// still found, it stays out of cgroups systemd did not delegate, Ctrl-Z stops it with its job as
// a shell's job, and a SIGKILLed run leaves a job doctor names and reap ends.
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cgroup_support.hpp"
#include "doctor_support.hpp"
#include "run_support.hpp"
#include "sim_harness.hpp"
#include "tmux_screen.hpp"

namespace gpureap::test {
namespace {

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Everything after the command's first word is the command's, however much it looks like
// gpureap's own options: the victim file is not overwritten, -h prints no help.
TEST(RunArguments, TheCommandsOwnOptionsAfterItsFirstWordAreTheCommands) {
  SimHost host;
  const std::string victim = host.state_dir() + "/victim.txt";
  std::ofstream(victim) << "precious\n";
  const auto result = host.gpureap({"run", "/bin/sh", "-c", "printf '<%s>' \"$@\"", "sh", "input.dat", "--report", victim,
                                    "-h", "--json", "--kill-timeout", "1"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "<input.dat><--report><" + victim + "><-h><--json><--kill-timeout><1>") << result.err;
  EXPECT_EQ(text_of(victim), "precious\n");

  // gpureap's own options before the command still count; `--` is still taken.
  const std::string report = host.state_dir() + "/report.json";
  const auto own = host.gpureap({"run", "--report", report, "--kill-timeout", "1", "/bin/echo", "--report", "x", "-h"});
  EXPECT_EQ(own.exit_code, 0) << own.err;
  EXPECT_EQ(own.out, "--report x -h\n");
  EXPECT_EQ(nlohmann::json::parse(text_of(report))["command"],
            nlohmann::json({"/bin/echo", "--report", "x", "-h"}));
  EXPECT_EQ(host.gpureap({"run", "--", "/bin/sh", "-c", "exit 3"}).exit_code, 3);
  EXPECT_EQ(host.gpureap({"run", "sh", "-c", "exit 4"}).exit_code, 4);

  // An option gpureap does not know, before the command, is refused rather than run.
  const auto unknown = host.gpureap({"run", "--kill-timout", "1", "/bin/true"});
  EXPECT_EQ(unknown.exit_code, 125) << unknown.err;
  EXPECT_EQ(std::count(unknown.err.begin(), unknown.err.end(), '\n'), 1) << unknown.err;
}

// The JSON follows whatever the job printed on a line of its own, and a report that cannot be
// written is an error, with the status it would have had on stderr.
TEST(RunReportOutput, JsonStartsOnALineOfItsOwnAndAFailedWriteIsAnError) {
  SimHost host;
  const auto result = host.gpureap({"run", "--json", "/bin/sh", "-c", "printf no-newline"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  ASSERT_EQ(result.out.rfind("no-newline\n{", 0), 0u) << result.out;
  EXPECT_EQ(nlohmann::json::parse(result.out.substr(result.out.find('\n') + 1))["exit_code"], 0);

  SpawnOptions options;
  options.env = host.env();
  const auto full = run_command({"/bin/sh", "-c", "exec \"$0\" run --json /bin/sh -c 'exit 3' > /dev/full", gpureap_binary()},
                                options);
  EXPECT_EQ(full.exit_code, 125) << full.err;
  EXPECT_NE(full.err.find("--json: cannot write the report to stdout"), std::string::npos) << full.err;
  EXPECT_NE(full.err.find("would have exited with status 3"), std::string::npos) << full.err;
}

// Without a signalfd a signal meant for the job would be lost or end gpureap alone: run refuses
// to start the job, in one line with the status documented for a run that could not run.
TEST(RunStart, WithoutASignalfdTheJobIsNotStartedAndTheStatusIs125) {
  SimHost host;
  const std::string marker = host.state_dir() + "/started";
  const auto result = host.gpureap({"run", "/bin/touch", marker},
                                   {{"LD_PRELOAD", FAILING_CALLS_LIBRARY}, {"GPUREAP_TEST_SIGNALFD_ERRNO", std::to_string(EMFILE)}});
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_NE(result.err.find("cannot create the signalfd that forwards signals to the job: Too many open files; the job "
                            "was not started"),
            std::string::npos)
      << result.err;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the job was started";
}

// A failed wait for signals (ENOMEM here) is gpureap's own trouble: the job runs to its end,
// its status is the run's, and the report says what happened.
TEST(RunStart, APollErrorWhileTheJobRunsDoesNotEndIt) {
  SimHost host;
  const std::string report = host.state_dir() + "/poll.json";
  const auto result = host.gpureap({"run", "--report", report, "/bin/sh", "-c", "sleep 0.4; echo done; exit 3"},
                                   {{"LD_PRELOAD", FAILING_CALLS_LIBRARY}, {"GPUREAP_TEST_POLL_FAILURES", "3"}});
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_EQ(result.out, "done\n") << result.err;
  const auto json = nlohmann::json::parse(text_of(report));
  EXPECT_NE(json.dump().find("waiting for signals failed (Cannot allocate memory); gpureap kept watching the job"),
            std::string::npos)
      << json.dump(2);
}

// A job that leaks on GPU 1 and exits before gpureap's first look was never seen there: the
// baseline taken before it started still shows its memory did not come back. (The holder
// events would see its open and look at once: without them, as on a host that has none.)
TEST(RunLeak, ALeakInTheJobsFirstMomentsIsFound) {
  SimHost host;
  const std::string report = host.state_dir() + "/leak.json";
  const auto result = host.gpureap({"run", "--verify-timeout", "0.3", "--report", report, GPUSIM_CUDA_BINARY, "--alloc",
                                    "1:2GiB", "--leak", "--exit-after", "0"},
                                   {{"GPUREAP_HOLDER_EVENTS", "off"}});
  EXPECT_EQ(result.exit_code, 123) << result.err;
  const auto json = nlohmann::json::parse(text_of(report));
  ASSERT_EQ(json["gpus"].size(), 1u) << json.dump(2);
  const auto& gpu = json["gpus"][0];
  EXPECT_EQ(gpu["index"], 1);
  EXPECT_FALSE(gpu["job_seen_on_it"].get<bool>());
  EXPECT_FALSE(gpu["verified_free"].get<bool>());
  EXPECT_EQ(gpu["job_last_bytes"], 2ull << 30);
  EXPECT_NE(result.err.find("GPU 1"), std::string::npos) << result.err;

  // A job that frees what it used is not blamed for anything.
  EXPECT_EQ(host.gpureap({"run", GPUSIM_CUDA_BINARY, "--alloc", "0:1GiB", "--exit-after", "0"}).exit_code, 0);
}

// From a cgroup named as systemd names a unit (an ssh session's scope) without systemd's
// delegation mark, run creates nothing there and owns the job as its descendants; with the
// mark (Delegate=yes) it makes the job's cgroup as before.
TEST(RunDelegation, RunFromANonDelegatedCgroupCreatesNoChildCgroupThere) {
  OwnCgroup slice("delegation");
  if (!slice.skip_reason().empty()) GTEST_SKIP() << slice.skip_reason();
  SimHost host;
  const std::string scope = slice.make_child("session-1.scope");
  const std::string report = host.state_dir() + "/scope.json";
  auto run_in_scope = [&]() {
    SpawnOptions options;
    options.env = host.env();
    return run_command({"/bin/sh", "-c", "echo $$ > \"$1\"/cgroup.procs && exec \"$0\" run --report \"$2\" /bin/sh -c 'cat /proc/self/cgroup; ls \"$1\"' sh \"$1\"",
                        gpureap_binary(), scope, report},
                       options);
  };
  const auto plain = run_in_scope();
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  const auto json = nlohmann::json::parse(text_of(report));
  EXPECT_EQ(json["ownership"], "subreaper-tree") << json.dump(2);
  EXPECT_NE(json["no_cgroup_reason"].get<std::string>().find("not delegated"), std::string::npos) << json.dump(2);
  EXPECT_NE(plain.out.find("/session-1.scope\n"), std::string::npos)
      << plain.out;
  EXPECT_EQ(plain.out.find("gpureap-run."), std::string::npos) << plain.out;

  if (setxattr(scope.c_str(), "trusted.delegate", "1", 1, 0) != 0) {
    GTEST_SKIP() << "cannot mark the cgroup delegated (trusted.delegate): " << std::strerror(errno);
  }
  const auto delegated = run_in_scope();
  EXPECT_EQ(delegated.exit_code, 0) << delegated.err;
  const auto marked = nlohmann::json::parse(text_of(report));
  EXPECT_EQ(marked["ownership"], "cgroup") << marked.dump(2);
  EXPECT_NE(delegated.out.find("/gpureap-run."), std::string::npos) << delegated.out;
}

// Ctrl-Z on an interactive run stops the job and gpureap with it; the shell's prompt comes
// back; fg resumes both, and Ctrl-C then ends the job as it would without gpureap.
TEST(RunTerminal, CtrlZStopsTheRunWithItsJobAndFgResumesBoth) {
  if (!TmuxScreen::available()) GTEST_SKIP() << "needs tmux";
  SimHost host;
  auto env = host.env();
  env["PS1"] = "prompt$ ";
  TmuxScreen shell({"/bin/bash", "--norc", "--noprofile", "-i"}, env, 120, 30, host.state_dir());
  ASSERT_TRUE(shell.wait_for("prompt$")) << shell.text();
  shell.type("'" + gpureap_binary() + "' run /bin/sh -c 'echo job-pid=$$; exec sleep 60'");
  shell.keys({"Enter"});
  // The job's line, not the typed command's (which holds "job-pid=$$").
  auto job_line = [](const std::string& screen) {
    std::istringstream lines(screen);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("job-pid=", 0) == 0) return line;
    }
    return std::string();
  };
  ASSERT_TRUE(shell.wait_until([&](const std::string& screen) { return !job_line(screen).empty(); })) << shell.text();
  const pid_t job = std::stoi(job_line(shell.text()).substr(8));
  pid_t guard = 0;
  {
    std::ifstream stat("/proc/" + std::to_string(job) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    std::istringstream rest(text.substr(text.rfind(')') + 2));
    char state = 0;
    rest >> state >> guard;
  }
  ASSERT_GT(guard, 1);

  shell.keys({"C-z"});
  ASSERT_TRUE(shell.wait_for("Stopped")) << shell.text();
  EXPECT_TRUE(eventually([&] { return process_state(job) == 'T' && process_state(guard) == 'T'; }, 3000))
      << process_state(job) << process_state(guard);
  shell.type("echo back-at-$((40+2))");
  shell.keys({"Enter"});
  EXPECT_TRUE(shell.wait_for("back-at-42")) << shell.text();

  shell.type("fg");
  shell.keys({"Enter"});
  EXPECT_TRUE(eventually([&] { return process_state(job) == 'S' && process_state(guard) == 'S'; }, 3000))
      << process_state(job) << process_state(guard);
  shell.keys({"C-c"});
  EXPECT_TRUE(eventually([&] { return !running(guard); }, 5000)) << shell.text();
  shell.type("echo status=$?");
  shell.keys({"Enter"});
  EXPECT_TRUE(shell.wait_for("status=130")) << shell.text();
  EXPECT_FALSE(running(job));
}

// gpureap run SIGKILLed: its job's cgroup is left with the job in it. doctor names it, and
// `reap --cgroup` ends that job and nothing beside it.
TEST(RunSupervisorGone, DoctorNamesTheOrphanedJobAndReapEndsItAlone) {
  if (!running_as_root()) GTEST_SKIP() << "the job's cgroup needs root";
  SimHost host;
  SimProcess bystander = host.start({"--alloc", "0:1GiB"});
  BackgroundRun run(host, {}, {"/bin/sh", "-c", "echo READY $$; exec sleep 60"});
  const auto ready = run.line_starting("READY ");
  ASSERT_EQ(ready.size(), 1u);
  const pid_t job = std::stoi(ready[0]);
  run.remember(job);
  const std::string name = "gpureap-run." + std::to_string(run.pid());
  const auto mount = cgroupfs::cgroup2_mount("/proc");
  if (!mount || !std::filesystem::exists(*mount + "/" + name)) GTEST_SKIP() << "run made no cgroup here";
  kill(run.pid(), SIGKILL);
  run.wait();
  EXPECT_TRUE(running(job));

  int code = 0;
  const auto report = doctor_json(host, {"--settle", "0"}, &code);
  const nlohmann::json* finding = nullptr;
  const auto gone = findings(report, "run-supervisor-gone");
  for (const auto& f : gone) {
    if (f["evidence"]["cgroup"] == "/" + name) finding = &f;
  }
  ASSERT_NE(finding, nullptr) << report.dump(2);
  EXPECT_EQ((*finding)["summary"].get<std::string>().rfind(name + ": its supervisor is gone", 0), 0u)
      << (*finding)["summary"];
  EXPECT_EQ((*finding)["evidence"]["pids"], nlohmann::json({job}));
  EXPECT_EQ((*finding)["severity"], "info");

  const auto reaped = host.gpureap({"reap", "--cgroup", "/" + name, "--kill-timeout", "5"});
  EXPECT_EQ(reaped.exit_code, 0) << reaped.out << reaped.err;
  EXPECT_TRUE(eventually([&] { return !running(job); }, 3000));
  EXPECT_TRUE(running(bystander.pid));
}

}  // namespace
}  // namespace gpureap::test
