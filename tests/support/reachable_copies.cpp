#include "reachable_copies.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>

namespace gpureap::test {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& what, int error) {
  throw std::runtime_error("copies for the test user: " + what + ": " + std::strerror(error));
}

// The test user is neither the owner (root) nor in root's group: "others" is what it gets.
bool others_can_reach(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (st.st_mode & S_IROTH) == 0) return false;
  for (fs::path dir = fs::path(path).parent_path();; dir = dir.parent_path()) {
    if (::stat(dir.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) return false;
    if (dir == dir.root_path()) return true;
  }
}

// Names this build's files as they are now: a rebuilt program gets a new copy.
std::string identity_hash(const ReachableCopies& build) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  auto mix = [&hash](const void* data, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) {
      hash ^= static_cast<const unsigned char*>(data)[i];
      hash *= 1099511628211ull;
    }
  };
  for (const auto& file : build.files) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) continue;  // not built: nothing to copy
    mix(file.data(), file.size() + 1);
    for (const auto value : {static_cast<std::int64_t>(st.st_ino), static_cast<std::int64_t>(st.st_size),
                             static_cast<std::int64_t>(st.st_mtim.tv_sec), static_cast<std::int64_t>(st.st_mtim.tv_nsec)}) {
      mix(&value, sizeof value);
    }
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

// stage_root exists, is a directory root owns and only root may write, and is locked by us.
int open_and_lock_stage_root(const std::string& stage_root) {
  if (::mkdir(stage_root.c_str(), 0755) != 0 && errno != EEXIST) fail("mkdir " + stage_root, errno);
  const int fd = ::open(stage_root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("open " + stage_root, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    ::close(fd);
    throw std::runtime_error("copies for the test user: " + stage_root +
                             " is not a directory that only root may write; remove it");
  }
  if (::flock(fd, LOCK_EX) != 0) {
    const int error = errno;
    ::close(fd);
    fail("flock " + stage_root, error);
  }
  return fd;
}

// Copies every file of the build to <stage_root>/<name>, keeping its path below build_dir.
void make_stage(const ReachableCopies& build, const std::string& stage) {
  std::string scratch = build.stage_root + "/.partial-XXXXXX";
  if (::mkdtemp(scratch.data()) == nullptr) fail("mkdtemp in " + build.stage_root, errno);
  std::error_code error;
  for (const auto& file : build.files) {
    if (!fs::exists(file)) continue;
    const fs::path copy = fs::path(scratch) / fs::path(file).lexically_relative(build.build_dir);
    fs::create_directories(copy.parent_path(), error);
    if (!error) fs::copy_file(file, copy, fs::copy_options::overwrite_existing, error);
    if (!error) fs::permissions(copy, fs::perms(0755), error);
    if (error) {
      fs::remove_all(scratch);
      fail("copy " + file + " to " + copy.string(), error.value());
    }
  }
  fs::permissions(scratch, fs::perms(0755), error);
  for (auto it = fs::recursive_directory_iterator(scratch); !error && it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory()) fs::permissions(it->path(), fs::perms(0755), error);
  }
  if (error || ::rename(scratch.c_str(), stage.c_str()) != 0) {
    const int why = error ? error.value() : errno;
    fs::remove_all(scratch);
    fail("move the copies to " + stage, why);
  }
}

// "" when the build's own paths are reachable, else the directory holding the copies.
std::string stage_for(const ReachableCopies& build) {
  if (::geteuid() != 0) return {};
  if (std::all_of(build.files.begin(), build.files.end(),
                  [](const std::string& file) { return !fs::exists(file) || others_can_reach(file); })) {
    return {};
  }
  const std::string stage = build.stage_root + "/" + identity_hash(build);
  const int lock = open_and_lock_stage_root(build.stage_root);
  struct stat st {};
  try {
    if (::lstat(stage.c_str(), &st) != 0) make_stage(build, stage);
  } catch (...) {
    ::close(lock);
    throw;
  }
  ::close(lock);
  return stage;
}

}  // namespace

std::string reachable_by_other_users(const ReachableCopies& build, const std::string& path) {
  if (std::find(build.files.begin(), build.files.end(), path) == build.files.end()) return path;
  static std::mutex mutex;
  static std::map<std::string, std::string> stages;  // stage_root → stage ("": none needed)
  std::string stage;
  {
    const std::lock_guard lock(mutex);
    auto found = stages.find(build.stage_root);
    if (found == stages.end()) found = stages.emplace(build.stage_root, stage_for(build)).first;
    stage = found->second;
  }
  if (stage.empty()) return path;
  return (fs::path(stage) / fs::path(path).lexically_relative(build.build_dir)).string();
}

}  // namespace gpureap::test
