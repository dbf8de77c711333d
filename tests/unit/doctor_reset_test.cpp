// doctor --fix --allow-reset runs nvidia-smi -r: a reset of a wedged GPU can hang in the
// driver, so the command is killed and reported when it overruns. A stand-in nvidia-smi on
// PATH plays the part.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor/doctor_fix.hpp"

namespace gpureap {
namespace {

// A directory holding an executable `nvidia-smi` with this body, first on PATH while alive.
class FakeNvidiaSmi {
 public:
  explicit FakeNvidiaSmi(const std::string& body) {
    char pattern[] = "/tmp/gpureap-fake-smi-XXXXXX";
    dir_ = ::mkdtemp(pattern) != nullptr ? pattern : "";
    const std::string path = dir_ + "/nvidia-smi";
    // A script runs from its descriptor ($0 is /dev/fd/N): $d names its directory.
    std::ofstream(path) << "#!/bin/sh\nd='" << dir_ << "'\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
    const char* old = std::getenv("PATH");
    old_path_ = old != nullptr ? old : "/usr/bin:/bin";
    ::setenv("PATH", (dir_ + ":" + old_path_).c_str(), 1);
  }
  ~FakeNvidiaSmi() {
    ::setenv("PATH", old_path_.c_str(), 1);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, old_path_;
};

TEST(DoctorReset, NvidiaSmiThatOverrunsIsKilledAndReported) {
  const FakeNvidiaSmi smi("echo $$ > \"$d/pid\"; exec sleep 60");
  ASSERT_FALSE(smi.dir().empty());
  const auto start = std::chrono::steady_clock::now();
  const FixResult result = reset_gpu(3, "GPU-3", std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(result.outcome, FixOutcome::Failed);
  EXPECT_NE(result.message.find("did not finish within 0.3 s and was killed"), std::string::npos) << result.message;
  pid_t pid = 0;
  std::ifstream(smi.dir() + "/pid") >> pid;
  ASSERT_GT(pid, 0);
  EXPECT_NE(::kill(pid, 0), 0) << "nvidia-smi (PID " << pid << ") still runs";
}

TEST(DoctorReset, NvidiaSmiThatAnswersIsReported) {
  const FakeNvidiaSmi smi("echo \"$@\" > \"$d/args\"; echo \"GPU 00000000:3B:00.0 was successfully reset.\"");
  const std::string uuid = "GPU-8d3c5c1e-5e2f-4b1a-9c0d-3f2e1d0c9b8a";
  const FixResult result = reset_gpu(0, uuid, std::chrono::seconds(10));
  EXPECT_EQ(result.outcome, FixOutcome::Done) << result.message;
  EXPECT_EQ(result.message, "GPU 00000000:3B:00.0 was successfully reset.");
  std::string args;
  std::getline(std::ifstream(smi.dir() + "/args"), args);
  EXPECT_EQ(args, "-r -i " + uuid);  // by UUID: an index may name another GPU once one fell off the bus
}

TEST(DoctorReset, AGpuIsNeverNamedByAnIndex) {
  const FakeNvidiaSmi smi("touch \"$d/ran\"");
  for (const std::string id : {"", "0", "3"}) {
    const FixResult result = reset_gpu(0, id, std::chrono::seconds(10));
    EXPECT_EQ(result.outcome, FixOutcome::Failed);
    EXPECT_NE(result.message.find("no UUID or PCI bus id"), std::string::npos) << result.message;
  }
  EXPECT_FALSE(std::filesystem::exists(smi.dir() + "/ran"));
}

TEST(DoctorReset, ARelativePathEntryIsNeverSearched) {
  const FakeNvidiaSmi smi("touch \"$d/ran\"");
  const std::string old_path = std::getenv("PATH");
  const std::string old_cwd = std::filesystem::current_path();
  std::filesystem::current_path(smi.dir());
  ::setenv("PATH", ".:", 1);  // "." and "" both name the working directory, where nvidia-smi is
  const FixResult result = reset_gpu(0, "GPU-0", std::chrono::seconds(10));
  ::setenv("PATH", old_path.c_str(), 1);
  std::filesystem::current_path(old_cwd);
  EXPECT_EQ(result.outcome, FixOutcome::Failed);
  EXPECT_NE(result.message.find("nvidia-smi is not installed"), std::string::npos) << result.message;
  EXPECT_FALSE(std::filesystem::exists(smi.dir() + "/ran"));
}

}  // namespace
}  // namespace gpureap
