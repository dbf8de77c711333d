#!/usr/bin/env bash
# Benchmark: the per-process floor of finding descriptor holders through /proc. For every
# process on the host, one thread, the CPU time (user + system) of ps's first look (open
# <pid>/fd, getdents64, readlinkat each descriptor, close) against fuser -v's sequence for the
# same process (stat <pid>, cwd, exe and root; open fd/, fstat, getdents64 to the end, stat each
# descriptor, close; open maps, fstat, read it in 1 KiB, close), measured alternately in the same
# run. Its ratio bounds what `gpureap ps` can reach against `fuser -v` where the processes that
# hold nothing dominate (bench/ps_vs_fuser.sh at 2,000 extra): one thread's ratio, halved at
# best on two cores, before start-up, holders and the driver are counted.
# Usage: bench/proc_look_floor.sh [EXTRA sleeping processes to add (default 2000)] [ROUNDS (default 5)]
set -euo pipefail
extra=${1:-2000}
rounds=${2:-5}
[[ "$extra" =~ ^[0-9]+$ ]] || { echo "bench: EXTRA must be a number (got '$extra')" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench: ROUNDS must be a positive number (got '$rounds')" >&2; exit 2; }
command -v cc >/dev/null || { echo "bench: needs a C compiler (cc)" >&2; exit 2; }
work=$(mktemp -d)
group=
cleanup() {
  if [ -n "$group" ]; then kill -- "-$group" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/floor.c" <<'C'
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
struct record { unsigned long ino; long off; unsigned short length; unsigned char type; char name[]; };
static char listing[32768];
static long calls;
static double cpu_ms(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}
static void ps_look(int root, int pid) {
  char path[32], target[512];
  snprintf(path, sizeof path, "%d/fd", pid);
  const int fd = openat(root, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  calls++;
  if (fd < 0) return;
  const long got = syscall(SYS_getdents64, fd, listing, sizeof listing);
  calls++;
  for (long at = 0; at < got;) {
    const struct record* r = (const struct record*)(listing + at);
    at += r->length;
    if (r->name[0] == '.') continue;
    readlinkat(fd, r->name, target, sizeof target);
    calls++;
  }
  close(fd);
  calls++;
}
static void fuser_look(int pid) {
  static const char* links[] = {"", "/cwd", "/exe", "/root"};
  char path[64], buffer[1024];
  struct stat st;
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "/proc/%d%s", pid, links[i]);
    stat(path, &st);
    calls++;
  }
  snprintf(path, sizeof path, "/proc/%d/fd", pid);
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
  calls++;
  if (fd >= 0) {
    fstat(fd, &st);
    calls++;
    long got;
    while ((got = syscall(SYS_getdents64, fd, listing, sizeof listing)) > 0) {
      calls++;
      for (long at = 0; at < got;) {
        const struct record* r = (const struct record*)(listing + at);
        at += r->length;
        if (r->name[0] == '.') continue;
        fstatat(fd, r->name, &st, 0);
        calls++;
      }
    }
    calls += 2;  /* the getdents64 that returned 0, and close */
    close(fd);
  }
  snprintf(path, sizeof path, "/proc/%d/maps", pid);
  fd = open(path, O_RDONLY);
  calls++;
  if (fd >= 0) {
    fstat(fd, &st);
    calls++;
    while (read(fd, buffer, sizeof buffer) > 0) calls++;
    calls += 2;
    close(fd);
  }
}
int main(int argc, char** argv) {
  const int rounds = atoi(argv[1]);
  static int pids[1 << 20];
  int n = 0;
  DIR* proc = opendir("/proc");
  for (struct dirent* e; (e = readdir(proc)) != NULL && n < (1 << 20);) {
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9') pids[n++] = atoi(e->d_name);
  }
  closedir(proc);
  const int root = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  double ps_ms = 0, fuser_ms = 0;
  long ps_calls = 0, fuser_calls = 0;
  for (int round = 0; round < rounds; round++) {
    calls = 0;
    const double t0 = cpu_ms();
    for (int i = 0; i < n; i++) ps_look(root, pids[i]);
    const double t1 = cpu_ms();
    ps_calls += calls;
    calls = 0;
    for (int i = 0; i < n; i++) fuser_look(pids[i]);
    fuser_ms += cpu_ms() - t1;
    fuser_calls += calls;
    ps_ms += t1 - t0;
  }
  printf("%d processes, %d rounds, one thread\n", n, rounds);
  printf("ps's look:    %6.1f us CPU per process, %5.1f system calls\n", ps_ms * 1e3 / rounds / n, (double)ps_calls / rounds / n);
  printf("fuser's look: %6.1f us CPU per process, %5.1f system calls\n", fuser_ms * 1e3 / rounds / n, (double)fuser_calls / rounds / n);
  printf("ratio ps/fuser: %.3f (one thread; at best half that on two cores)\n", ps_ms / fuser_ms);
  return 0;
}
C
cc -O2 -Wall -o "$work/floor" "$work/floor.c"
if [ "$extra" -gt 0 ]; then
  # Sleeping processes with three descriptors each, as bench/sim_host.sh adds them (the count
  # reaches bash as its $1, never as script text).
  # shellcheck disable=SC2016
  setsid bash -c 'for ((i = 0; i < $1; i++)); do sleep 3600 & done; wait' floor "$extra" </dev/null >/dev/null 2>&1 &
  group=$!
  for ((i = 0; i < 1200; i++)); do
    [ "$(pgrep -c -g "$group" || true)" -gt "$extra" ] && break
    sleep 0.1
  done
fi
echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$work/floor" "$rounds"
