// Whether reading a process's address-space files could block. cmdline, environ and maps
// take the process's mmap lock; a thread in uninterruptible sleep (D) may hold it (stuck in a
// page fault on a dead NFS server, or in the GPU driver), and the reader then waits with it:
// the classic "ps hangs". So those files are never read while any thread is in D.
#pragma once

#include <cstdint>

#include <sys/types.h>

namespace gpureap::procfs {

class ReadBuffer;
class DirLister;

// True when the process whose /proc/<pid> (or task/<tid>) directory is pid_dir has a thread
// in state D, read just now; also when its threads cannot be listed (unknown: assume the
// worst). `main_state` and `threads` come from the stat of thread `pid` read just before ('D'
// answers at once; one thread needs no look at the others); that stat is not read again.
bool address_space_may_block(int pid_dir, pid_t pid, char main_state, std::int64_t threads,
                             ReadBuffer& buffer, DirLister& lister);

}  // namespace gpureap::procfs
