#include "spawn/spawn_hygiene.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>

namespace gpureap::spawn_child {
namespace {

// close_range(2) (Linux 5.9); before it, one close per possible descriptor up to the limit.
void close_span(unsigned first, unsigned last) {
  if (first > last) return;
  if (::syscall(SYS_close_range, first, last, 0) == 0) return;
  struct rlimit limit {};
  unsigned end = last;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur - 1 < end) {
    end = static_cast<unsigned>(limit.rlim_cur - 1);
  }
  for (unsigned fd = first; fd <= end && fd >= first; ++fd) ::close(static_cast<int>(fd));
}

}  // namespace

int close_descriptors_except(int keep_a, int keep_b) {
  int low = keep_a < keep_b ? keep_a : keep_b;
  int high = keep_a < keep_b ? keep_b : keep_a;
  if (low < 3) low = high;  // -1 (none) or a standard descriptor: nothing to skip for it
  unsigned next = 3;
  for (int keep : {low, high}) {
    if (keep < static_cast<int>(next)) continue;
    if (static_cast<unsigned>(keep) > next) close_span(next, static_cast<unsigned>(keep) - 1);
    next = static_cast<unsigned>(keep) + 1;
  }
  close_span(next, ~0U);
  return 0;
}

void default_signal_dispositions() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  // SIGKILL and SIGSTOP cannot be changed, glibc's own (32, 33) are refused: EINVAL is fine.
  for (int sig = 1; sig < NSIG; ++sig) (void)::sigaction(sig, &dfl, nullptr);
}

int reset_resource_limits() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_CORE, &limit) != 0) return errno;
  limit.rlim_cur = 0;
  if (::setrlimit(RLIMIT_CORE, &limit) != 0) return errno;
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return errno;
  limit.rlim_cur = limit.rlim_max < 1024 ? limit.rlim_max : 1024;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return errno;
  for (int resource : {RLIMIT_DATA, RLIMIT_AS}) {
    if (::getrlimit(resource, &limit) != 0) return errno;
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(resource, &limit) != 0) return errno;
  }
  return 0;
}

int drop_credentials(uid_t uid, gid_t gid, const gid_t* groups, int group_count) {
  if (::syscall(SYS_setgroups, group_count, groups) != 0) return errno;
  if (::syscall(SYS_setresgid, gid, gid, gid) != 0) return errno;
  if (::syscall(SYS_setresuid, uid, uid, uid) != 0) return errno;
  uid_t ruid = 0, euid = 0, suid = 0;
  gid_t rgid = 0, egid = 0, sgid = 0;
  if (::getresuid(&ruid, &euid, &suid) != 0 || ::getresgid(&rgid, &egid, &sgid) != 0) return errno;
  if (ruid != uid || euid != uid || suid != uid || rgid != gid || egid != gid || sgid != gid) return EPERM;
  gid_t now[kMaxGroups];
  const int count = ::getgroups(kMaxGroups, now);
  if (count != group_count) return EPERM;
  for (int i = 0; i < count; ++i) {
    bool found = false;
    for (int j = 0; j < group_count && !found; ++j) found = now[i] == groups[j];
    if (!found) return EPERM;
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  return 0;
}

}  // namespace gpureap::spawn_child
