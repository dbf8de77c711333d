// An 80-column terminal and a terminal whose locale is not UTF-8, as a new user has them: what
// ps, top, doctor and kill put on the screen. Lines fit (columns give way, gpureap's own words
// wrap, nothing the terminal would wrap), and LC_ALL=C gets ASCII alone, with every non-ASCII
// byte of a command escaped; JSON keeps the exact bytes whatever the locale.
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "terminal_run.hpp"
#include "text/truncate.hpp"
#include "tmux_screen.hpp"

namespace gpureap::test {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The line holding " <pid> ", or "".
std::string row_of(const std::string& screen, pid_t pid) {
  for (const auto& line : split_lines(screen)) {
    if (line.find(" " + std::to_string(pid) + " ") != std::string::npos) return line;
  }
  return {};
}

std::size_t first_non_ascii(const std::string& text) {
  const auto at = std::find_if(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) > 0x7F; });
  return at == text.end() ? std::string::npos : static_cast<std::size_t>(at - text.begin());
}

std::map<std::string, std::string> plain_env(const SimHost& host, const std::string& locale) {
  auto env = host.env();
  env["NO_COLOR"] = "1";
  env["LC_ALL"] = locale;
  return env;
}

// gpureap ARGS in a tmux window of `columns` x 60: the screen once it has printed (the shell
// keeps the window open after it).
std::string tmux_screen_of(const SimHost& host, const std::vector<std::string>& args, int columns,
                           const std::string& locale, const std::string& last_words) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "\"$@\"; exec sleep 60", "sh", gpureap_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  TmuxScreen screen(argv, plain_env(host, locale), columns, 60, host.state_dir());
  EXPECT_TRUE(screen.wait_for(last_words)) << screen.text();
  return screen.text();
}

class NarrowTerminal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!TmuxScreen::available()) GTEST_SKIP() << "tmux is not installed (scripts/setup-deps.sh installs it)";
  }
};

TEST_F(NarrowTerminal, PsAt80ColumnsLeavesOutColumnsAndSaysSo) {
  SimHost host;
  auto job = host.start({"--alloc", "0:4GiB", "--workers", "1", "--sm-util", "40"});
  const std::string closing = "CONTAINER, SM left out to fit 80 columns: --wide shows every column.";
  const std::string screen = tmux_screen_of(host, {"ps"}, 80, "C.UTF-8", closing);
  for (const auto& line : split_lines(screen)) EXPECT_LE(display_width(line), 80u) << line << "\n" << screen;
  const auto lines = split_lines(screen);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "      PID USER      TYPE    GPU MEM IDENTITY   S     AGE  CPU% COMMAND"),
            lines.end())
      << screen;
  EXPECT_NE(std::find(lines.begin(), lines.end(), closing), lines.end()) << screen;
  // The command takes the rest of the row, cut with an ellipsis: exactly 80 columns.
  const std::string row = row_of(screen, job.pid);
  EXPECT_EQ(row.rfind(fmt::format("  {:>7} root      C       4.0 GiB ok         S ", job.pid), 0), 0u) << screen;
  EXPECT_EQ(display_width(row), 80u) << row;
  EXPECT_EQ(row.substr(row.size() - std::string("…").size()), "…") << row;
  // The worker's row: PPID gave way as well.
  EXPECT_NE(std::find(lines.begin(), lines.end(), "      PID USER      S     AGE ROLE                         COMMAND"),
            lines.end())
      << screen;
  EXPECT_NE(row_of(screen, job.workers[0]).find(fmt::format("worker of {} (inherited)", job.pid)), std::string::npos)
      << screen;

  // --wide: every column, the whole command; the terminal wraps it, as asked.
  const std::string wide = tmux_screen_of(host, {"ps", "--wide"}, 200, "C.UTF-8", "COMMAND");
  EXPECT_NE(wide.find("      PID USER      TYPE    GPU MEM IDENTITY   S     AGE  CPU%   SM CONTAINER        COMMAND"),
            std::string::npos)
      << wide;
  EXPECT_NE(row_of(wide, job.pid).find(std::string(GPUSIM_CUDA_BINARY) + " --alloc 0:4GiB --workers 1 --sm-util 40"),
            std::string::npos)
      << wide;
  EXPECT_EQ(wide.find("left out to fit"), std::string::npos) << wide;
}

TEST_F(NarrowTerminal, TopAt80ColumnsInACLocaleDrawsInAsciiAlone) {
  SimHost host({"--gpus", "2"});
  auto job = host.start({"--alloc", "0:40GiB", "--name", "job-\xc3\x9b-x"});
  std::vector<std::string> argv = {gpureap_binary(), "top"};
  TmuxScreen top(argv, plain_env(host, "C"), 80, 24, host.state_dir());
  ASSERT_TRUE(top.wait_for(" " + std::to_string(job.pid) + " ")) << top.text();
  const std::string screen = top.text();
  EXPECT_EQ(first_non_ascii(screen), std::string::npos) << screen;
  for (const auto& line : split_lines(screen)) EXPECT_LE(line.size(), 80u) << line;
  EXPECT_NE(row_of(screen, job.pid).find("job-\\xc3\\x9b-x"), std::string::npos) << screen;
  EXPECT_NE(screen.find("gpureap top | "), std::string::npos) << screen;
  EXPECT_NE(screen.find("#####"), std::string::npos) << "the memory bar in ASCII:\n" << screen;
  top.keys({"q"});
  EXPECT_EQ(top.wait_exit(), 0) << top.text();
}

TEST(AsciiLocale, PsAndKillWriteAsciiAndJsonKeepsTheBytes) {
  SimHost host;
  // C3 9B is "Û" in UTF-8; alone on an 8-bit terminal, 0x9B is CSI.
  const std::string name = "job-\xc3\x9b-x";
  auto job = host.start({"--alloc", "0:2GiB", "--workers", "1", "--name", name});
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"ps"}, {"ps", "--tree"}, {"kill", std::to_string(job.pid), "--dry-run"}}) {
    const auto r = host.gpureap(args, {{"LC_ALL", "C"}});
    EXPECT_EQ(first_non_ascii(r.out), std::string::npos) << args[0] << ":\n" << r.out;
    EXPECT_EQ(first_non_ascii(r.err), std::string::npos) << r.err;
    EXPECT_NE(row_of(r.out, job.pid).find("job-\\xc3\\x9b-x"), std::string::npos) << r.out;
  }
  const auto ps = host.gpureap({"ps"}, {{"LC_ALL", "C"}});
  EXPECT_NE(ps.out.find("GPU 0 | NVIDIA"), std::string::npos) << ps.out;
  EXPECT_NE(ps.out.find("\n  memory [#.............................] 2.0 GiB used of 80.0 GiB (2%), 512 MiB reserved "
                        "by the driver\n"),
            std::string::npos)
      << ps.out;
  const auto tree = host.gpureap({"ps", "--tree"}, {{"LC_ALL", "C"}});
  EXPECT_NE(row_of(tree.out, job.workers[0]).find("`-"), std::string::npos) << tree.out;
  // The same bytes as a UTF-8 locale shows them as one character.
  const auto utf8 = host.gpureap({"ps"}, {{"LC_ALL", "C.UTF-8"}});
  EXPECT_NE(row_of(utf8.out, job.pid).find(name), std::string::npos) << utf8.out;
  EXPECT_NE(utf8.out.find("GPU 0 · NVIDIA"), std::string::npos) << utf8.out;

  // JSON: the exact bytes, in either locale.
  for (const std::string locale : {"C", "C.UTF-8"}) {
    const auto r = host.gpureap({"ps", "--json"}, {{"LC_ALL", locale}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto ps_json = nlohmann::json::parse(r.out);
    const auto* p = find_process(ps_json, job.pid);
    ASSERT_NE(p, nullptr) << r.out;
    EXPECT_EQ(p->at("command").get<std::string>().rfind(name, 0), 0u) << locale << ": " << p->dump();
  }
}

TEST(NarrowTerminalText, DoctorAndKillAt80ColumnsWrapTheirOwnWordsAndCutNothing) {
  SimHost host;
  auto orphaned = orphaned_job(host, "0:6GiB");
  std::vector<std::string> argv = {gpureap_binary(), "doctor", "--no-kernel-log", "--settle", "0"};
  const auto doctor = run_on_terminal(argv, plain_env(host, "C.UTF-8"), 80);
  for (const auto& line : split_lines(doctor.screen)) EXPECT_LE(display_width(line), 80u) << line << "\n" << doctor.screen;
  // The finding's summary continues under its own start; the remedy is whole, and runs.
  EXPECT_NE(doctor.screen.find("WARNING   GPU 0: 6.0 GiB kept in use by 2 orphaned process(es) whose job has\n"
                               "          died, which still hold its device files\n"),
            std::string::npos)
      << doctor.screen;
  EXPECT_NE(doctor.screen.find(fmt::format("gpureap kill {} {}\n", orphaned.workers[0], orphaned.workers[1])),
            std::string::npos)
      << doctor.screen;
  EXPECT_EQ(doctor.screen.find("…"), std::string::npos) << "doctor cuts nothing:\n" << doctor.screen;
  argv.push_back("--wide");
  const auto wide = run_on_terminal(argv, plain_env(host, "C.UTF-8"), 80);
  EXPECT_NE(wide.screen.find("WARNING   GPU 0: 6.0 GiB kept in use by 2 orphaned process(es) whose job has died, "
                             "which still hold its device files\n"),
            std::string::npos)
      << wide.screen;

  const auto kill = run_on_terminal({gpureap_binary(), "kill", "--dry-run", "--holders", "--gpu", "0"},
                                    plain_env(host, "C.UTF-8"), 80);
  for (const auto& line : split_lines(kill.screen)) EXPECT_LE(display_width(line), 80u) << line << "\n" << kill.screen;
  // The reason wraps under its own start, wherever the PID's width puts the break: joined at
  // its continuation lines' indent, it is whole.
  std::string joined = kill.screen;
  for (std::size_t at; (at = joined.find("\n                ")) != std::string::npos;) {
    joined.replace(at, 17, " ");
  }
  EXPECT_NE(joined.find(fmt::format("           why: keeps the context of exited PID {} alive (the driver "
                                    "lists it on GPU 0 (6.0 GiB))\n",
                                    orphaned.pid)),
            std::string::npos)
      << kill.screen;
  EXPECT_NE(kill.screen.find("\n                "), std::string::npos) << "the reason wraps at 80 columns:\n" << kill.screen;
  EXPECT_TRUE(running(orphaned.workers[0])) << "a dry run signals nothing";
}

}  // namespace
}  // namespace gpureap::test
