// `gpureap run` and `gpureap reap` against what a hostile local user or a careless script can
// do: a FIFO planted where gpureap (root) writes its report, audit log or dumps; an empty value
// from an unset variable; signals sent to gpureap run while it ends the job.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "run_support.hpp"

namespace gpureap::test {
namespace {

void expect_one_line(const CommandResult& r, int status, const std::string& words) {
  EXPECT_EQ(r.exit_code, status) << r.err;
  EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(HostileJob, AFifoAtTheReportOrAuditLogPathIsOneLineAndNeverAHang) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string fifo = host.state_dir() + "/planted-fifo";
  const std::string marker = host.state_dir() + "/started";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0666), 0);
  const auto started = std::chrono::steady_clock::now();
  expect_one_line(host.gpureap({"run", "--report", fifo, "--", "/usr/bin/touch", marker}), 125, "not a regular file");
  expect_one_line(host.gpureap({"run", "--audit-log", fifo, "--", "/usr/bin/touch", marker}), 125,
                  "not a regular file");
  expect_one_line(host.gpureap({"reap", "--uid", std::to_string(getuid()), "--audit-log", fifo}), 2,
                  "not a regular file");
  expect_one_line(host.gpureap({"run", "--report", "/dev/full", "--", "/usr/bin/touch", marker}), 125,
                  "not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_TRUE(running(job.pid));
}

}  // namespace
}  // namespace gpureap::test
