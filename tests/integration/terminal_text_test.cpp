// What reaches a terminal from text a process chose: a GPU process whose argv[0] and comm hold
// "ESC]0;pwned BEL ESC[2J" (retitle and clear root's screen), C1 controls and invalid UTF-8 is
// shown escaped by ps, ps --tree, ps --watch, kill (plan, prompt, results) and doctor; JSON keeps
// the exact bytes. Long command lines are cut to the terminal on character boundaries and shown
// whole through a pipe or with --wide.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "terminal_run.hpp"
#include "text/truncate.hpp"
#include "text/utf8.hpp"

namespace gpureap::test {
namespace {

// Title change + bell, clear screen, a raw C1 CSI, a UTF-8 C1 CSI, invalid UTF-8, DEL. The
// first 15 bytes become comm, which the simulator records in its (JSON) state: they stay valid
// UTF-8; the rest is only in argv[0].
const std::string kHostileName = "\x1b]0;pwned\x07\x1b[2Jx\x9b" "31m\xc2\x9b" "1m\xff\xfe\x7f" "evil";
// How the sanitiser shows it: visible proof the name was rendered, not dropped.
const std::string kShownStart = "\\x1b]0;pwned\\x07\\x1b[2Jx\\x9b31m\\u009b1m\\xff\\xfe\\x7fevil";

// 15 ASCII bytes (comm, which the simulator keeps as JSON, must stay valid UTF-8), then 14 times
// 13 bytes / 9 columns of wide characters: 197 bytes.
std::string long_name() {
  std::string name = "job-0123456789-";
  for (int i = 0; i < 14; ++i) name += "训练任务-";
  return name;
}

// The harness's environment with colour off: a terminal gets only what the text holds.
std::map<std::string, std::string> no_colour(std::map<std::string, std::string> env) {
  env["NO_COLOR"] = "1";
  return env;
}

// The first byte offset at which `text` holds something a terminal would act on: a C0 control
// other than '\n', DEL, a C1 control (raw or as UTF-8), or invalid UTF-8; npos when clean.
std::size_t first_control(const std::string& text) {
  for (std::size_t at = 0; at < text.size();) {
    const utf8::Char c = utf8::decode(text, at);
    if (!c.valid) return at;
    if ((c.code < 0x20 && c.code != '\n') || (c.code >= 0x7F && c.code <= 0x9F)) return at;
    at += c.size;
  }
  return std::string::npos;
}

#define EXPECT_INERT(text)                                                                        \
  do {                                                                                            \
    const std::string& t_ = (text);                                                               \
    const std::size_t at_ = first_control(t_);                                                    \
    EXPECT_EQ(at_, std::string::npos) << #text << " has a control at byte " << at_ << ":\n" << t_; \
  } while (0)

TEST(TerminalText, PsTableAndTreeShowAHostileCommandEscaped) {
  SimHost host;
  auto job = host.start({"--name", kHostileName, "--alloc", "0:1GiB", "--workers", "1"});
  for (const std::vector<std::string>& args : {std::vector<std::string>{"ps"}, {"ps", "--tree"}, {"ps", "--wide"}}) {
    const auto r = host.gpureap(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_INERT(r.out);
    EXPECT_INERT(r.err);
    EXPECT_NE(r.out.find(kShownStart), std::string::npos) << r.out;
  }
  // On a terminal, too.
  const auto tty = run_on_terminal({gpureap_binary(), "ps"}, no_colour(host.env()), 200);
  EXPECT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_INERT(tty.screen);
  EXPECT_NE(tty.screen.find("\\x1b]0;pwned"), std::string::npos) << tty.screen;
}

TEST(TerminalText, PsWatchShowsAHostileCommandEscaped) {
  SimHost host;
  auto job = host.start({"--name", kHostileName, "--alloc", "0:1GiB"});
  std::vector<std::string> argv = {"/usr/bin/timeout", "--preserve-status", "-s", "INT", "1.5", gpureap_binary(), "ps", "--watch", "0.2"};
  SpawnOptions options;
  options.env = host.env();
  const auto r = run_command(argv, options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_INERT(r.out);
  EXPECT_NE(r.out.find(kShownStart), std::string::npos) << r.out;
}

TEST(TerminalText, JsonKeepsTheExactCommand) {
  SimHost host;
  auto job = host.start({"--name", kHostileName, "--alloc", "0:1GiB"});
  const auto ps = host.ps_json();
  const auto* p = find_process(ps, job.pid, 0);
  ASSERT_NE(p, nullptr) << ps.dump(2);
  // The valid bytes survive exactly (invalid UTF-8 is replaced by U+FFFD in JSON, as before).
  const std::string command = (*p)["command"];
  EXPECT_EQ(command.rfind("\x1b]0;pwned\x07\x1b[2J", 0), 0u) << command;
}

TEST(TerminalText, KillPlanPromptAndResultsShowAHostileCommandEscaped) {
  SimHost host;
  auto shown = host.start({"--name", kHostileName, "--alloc", "0:1GiB"});
  const auto dry = host.gpureap({"kill", std::to_string(shown.pid), "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_INERT(dry.out);
  EXPECT_INERT(dry.err);
  EXPECT_NE(dry.out.find(kShownStart), std::string::npos) << dry.out;

  // The prompt on a terminal: two processes (the job and its worker) need a yes; answer no.
  auto asked = host.start({"--name", kHostileName, "--alloc", "1:1GiB", "--workers", "1"});
  const auto prompt =
      run_on_terminal({gpureap_binary(), "kill", std::to_string(asked.pid)}, no_colour(host.env()), 200, "n\n");
  EXPECT_EQ(prompt.exit_code, 10) << prompt.screen << prompt.err;
  EXPECT_INERT(prompt.screen);
  EXPECT_INERT(prompt.err);
  EXPECT_NE((prompt.screen + prompt.err).find(kShownStart), std::string::npos) << prompt.screen << prompt.err;
  EXPECT_TRUE(running(asked.pid));

  const auto done = host.gpureap({"kill", std::to_string(shown.pid), "--yes"});
  EXPECT_EQ(done.exit_code, 0) << done.out << done.err;
  EXPECT_INERT(done.out);
  EXPECT_INERT(done.err);
  EXPECT_NE(done.out.find("Results:"), std::string::npos) << done.out;
  EXPECT_FALSE(running(shown.pid));
}

TEST(TerminalText, DoctorShowsHostileCommandsAndKernelLinesEscaped) {
  SimHost host;
  // A zombie's parent is named in doctor's finding and in the --fix plan.
  auto parent = host.start({"--name", kHostileName, "--alloc", "0:1GiB", "--zombie-child"});
  const std::string log = host.state_dir() + "/kernel.log";
  {
    std::ofstream out(log, std::ios::binary);
    out << "[ 5678.901234] NVRM: Xid (PCI:0000:05:00): 13, pid=" << parent.pid << ", name=" << kHostileName
        << ", Graphics SM Warp Exception\n";
  }
  const auto text = host.gpureap({"doctor", "--kernel-log", log});
  EXPECT_INERT(text.out);
  EXPECT_INERT(text.err);
  EXPECT_NE(text.out.find(kShownStart), std::string::npos) << text.out;

  const auto fix = host.gpureap({"doctor", "--fix", "--only", "zombie", "--kernel-log", log});
  EXPECT_EQ(fix.exit_code, 10) << fix.out << fix.err;
  EXPECT_INERT(fix.out);
  EXPECT_INERT(fix.err);
  EXPECT_NE(fix.err.find(kShownStart), std::string::npos) << fix.err;
  EXPECT_TRUE(running(parent.pid));
}

// The rows that show `pid`, one per line.
std::vector<std::string> lines_with(const std::string& text, pid_t pid) {
  std::vector<std::string> found;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.find(" " + std::to_string(pid) + " ") != std::string::npos) found.push_back(line);
    start = end + 1;
  }
  return found;
}

TEST(OutputWidth, LongCommandIsWholeThroughAPipeAndWithWide) {
  SimHost host;
  auto job = host.start({"--name", long_name(), "--alloc", "0:1GiB"});
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"ps"}, {"ps", "--tree"}, {"kill", std::to_string(job.pid), "--dry-run"}}) {
    const auto piped = host.gpureap(args);
    EXPECT_NE(piped.out.find(long_name()), std::string::npos) << piped.out;
    auto wide_args = args;
    wide_args.push_back("--wide");
    const auto wide = run_on_terminal(
        [&] {
          std::vector<std::string> argv = {gpureap_binary()};
          argv.insert(argv.end(), wide_args.begin(), wide_args.end());
          return argv;
        }(),
        no_colour(host.env()), 100);
    EXPECT_NE(wide.screen.find(long_name()), std::string::npos) << wide.screen << wide.err;
  }
}

TEST(OutputWidth, CommandIsCutToTheTerminalWithoutSplittingACharacter) {
  SimHost host;
  auto job = host.start({"--name", long_name(), "--alloc", "0:1GiB"});
  // The terminal's width (TIOCGWINSZ), then COLUMNS over it.
  for (const auto& [columns, env_columns] : {std::pair<unsigned short, std::string>{130, ""}, {200, "120"}}) {
    auto env = no_colour(host.env());
    if (!env_columns.empty()) env["COLUMNS"] = env_columns;
    const std::size_t limit = env_columns.empty() ? columns : std::stoul(env_columns);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"ps"}, {"ps", "--tree"}, {"kill", std::to_string(job.pid), "--dry-run"}}) {
      std::vector<std::string> argv = {gpureap_binary()};
      argv.insert(argv.end(), args.begin(), args.end());
      const auto r = run_on_terminal(argv, env, columns);
      EXPECT_INERT(r.screen);  // also: valid UTF-8, nothing split
      const auto rows = lines_with(r.screen, job.pid);
      ASSERT_FALSE(rows.empty()) << args[0] << "\n" << r.screen;
      for (const auto& row : rows) {
        EXPECT_LE(display_width(row), limit) << row;
        EXPECT_NE(row.find("训练"), std::string::npos) << row;
        EXPECT_NE(row.find("…"), std::string::npos) << row;
      }
    }
  }
}

TEST(DurationOptions, KillTimeoutThatIsNotAFiniteBoundedDurationIsUsageAndSignalsNothing) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  for (const char* bad : {"nan", "inf", "-5", "1e300", "1e16", "", "10x"}) {
    for (const char* option : {"--timeout", "--verify-timeout"}) {
      const auto r = host.gpureap({"kill", std::to_string(job.pid), "--yes", option, bad});
      EXPECT_EQ(r.exit_code, 2) << option << " " << bad << ": " << r.out << r.err;
      EXPECT_NE(r.err.find(option), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
      EXPECT_TRUE(running(job.pid)) << option << " " << bad;
    }
  }
  // A valid one still works.
  const auto ok = host.gpureap({"kill", std::to_string(job.pid), "--yes", "--timeout", "2.5", "--verify-timeout", "30s"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_FALSE(running(job.pid));
}

TEST(DurationOptions, DoctorAndPsRejectBadDurationsWithTheirUsageStatus) {
  SimHost host;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--settle", "nan"}, {"--settle", "601"}, {"--since", "inf"}, {"--since", "-5"},
        {"--tolerance-mib", "-5"}, {"--tolerance-mib", "nan"}, {"--tolerance-mib", "1e300"}, {"--timeout", "nan"},
        {"--verify-timeout", "1e16"}}) {
    std::vector<std::string> argv = {"doctor", "--no-kernel-log"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = host.gpureap(argv);
    EXPECT_EQ(r.exit_code, 11) << args[0] << " " << args[1] << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(args[0]), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << "no diagnosis is made";
  }
  for (const char* bad : {"nan", "inf", "-5", "1e300", "0", "0.01", "90000"}) {
    const auto r = host.gpureap({"ps", "--watch", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("--watch"), std::string::npos) << r.err;
  }
  const auto since = host.gpureap({"doctor", "--since", "90m", "--settle", "0.5s", "--tolerance-mib", "128"});
  EXPECT_NE(since.exit_code, 11) << since.err;
}

}  // namespace
}  // namespace gpureap::test
