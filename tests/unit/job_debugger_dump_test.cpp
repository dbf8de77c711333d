// `run --dump-on-hang`'s debuggers attach only to the pinned process, and one that hangs after
// stopping its target never leaves it stopped. A stand-in `gdb` on PATH plays the debugger.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "job/stuck_evidence.hpp"

namespace gpureap::job {
namespace {

std::string stat_field(pid_t pid, int field) {  // 1-based, as proc(5) numbers them
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(in, text);
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::string word;
  for (int i = 3; i <= field && rest >> word; ++i) {
  }
  return word;
}

class DebuggerDump : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpureap-dump-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    std::filesystem::create_directory(dir_ + "/bin");
    std::filesystem::create_directory(dir_ + "/out");
    old_path_ = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "/usr/bin:/bin";
    ::setenv("PATH", (dir_ + "/bin:" + old_path_).c_str(), 1);
    target_ = ::fork();
    ASSERT_GE(target_, 0);
    if (target_ == 0) {
      ::execl("/bin/sleep", "sleep", "60", nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 100 && stat_field(target_, 3) != "S"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    start_ticks_ = std::stoull(stat_field(target_, 22));
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    ::kill(target_, SIGKILL);
    ::waitpid(target_, nullptr, 0);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  void fake_gdb(const std::string& body) {
    const std::string path = dir_ + "/bin/gdb";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
  }
  ProcessEvidence dump(std::uint64_t start_ticks) {
    ProcessEvidence evidence;
    evidence.pid = target_;
    evidence.state = 'S';
    DumpSettings settings;
    settings.directory = dir_ + "/out";
    settings.timeout = std::chrono::seconds(1);
    dump_process(settings, "sleep", true, start_ticks, evidence);
    return evidence;
  }
  std::string dir_, old_path_;
  pid_t target_ = -1;
  std::uint64_t start_ticks_ = 0;
};

std::string joined(const std::vector<std::string>& notes) {
  std::string out;
  for (const auto& n : notes) out += n + "\n";
  return out;
}

TEST_F(DebuggerDump, ADebuggerThatStopsItsTargetAndHangsLeavesItRunning) {
  fake_gdb("kill -STOP \"$2\"; echo attached; exec sleep 300");  // gdb -p PID ...
  const ProcessEvidence evidence = dump(start_ticks_);
  const std::string state = stat_field(target_, 3);
  EXPECT_NE(state, "T") << "the target was left stopped; notes:\n" << joined(evidence.notes);
  EXPECT_NE(joined(evidence.notes).find("gdb did not finish within 1 s"), std::string::npos) << joined(evidence.notes);
  EXPECT_NE(joined(evidence.notes).find("left PID " + std::to_string(target_) + " stopped: it was continued"),
            std::string::npos)
      << joined(evidence.notes);
}

TEST_F(DebuggerDump, NoDebuggerAttachesToAProcessThatIsNotThePinnedOne) {
  fake_gdb("touch \"" + dir_ + "/ran\"; echo stack");
  const ProcessEvidence other = dump(start_ticks_ + 1);  // the PID now names another start
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ran"));
  EXPECT_TRUE(other.dump_files.empty());
  EXPECT_NE(joined(other.notes).find("is no longer the job's process"), std::string::npos) << joined(other.notes);

  const ProcessEvidence same = dump(start_ticks_);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/ran"));
  ASSERT_EQ(same.dump_files.size(), 1u) << joined(same.notes);
}

}  // namespace
}  // namespace gpureap::job
