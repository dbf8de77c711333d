// `gpusim drm-driver`: the simulated DRM driver. It keeps the files the product reads in step
// with the real processes holding the simulated device files, once a cycle (every ~20 ms):
//
// (a) scans the real /proc/[0-9]*/fd for descriptors of dev/dri/<node> and dev/kfd (the file's
//     dev:ino, not only its path, must be the state's: a same-named file on another mount is
//     not the simulated node); for each descriptor
//     of a DRM node it reads the real /proc/<pid>/fdinfo/<fd>, whose `lock:` lines the kernel
//     prints for the locks of that open file description (fs/proc/fd.c seq_show() calls
//     show_fd_locks() in fs/locks.c: "lock:\t1: OFDLCK ADVISORY  WRITE -1 <dev>:<ino> <start>
//     <end>"), and learns the client id from the OFD lock's byte; it writes
//     fdinfo/<pid>/fdinfo/<fd> in the device's format (fdinfo_text.hpp) and removes those of
//     descriptors no longer held. A descriptor without a client lock (a bare open()) gets none.
// (b) a client whose lock is gone (F_OFD_GETLK through drm/nodes/<node> finds none on its byte:
//     the last descriptor of its open file description closed, however its holders died) is
//     closed: its record goes, and its VRAM leaves mem_info_vram_used after the device's release
//     delay;
// (c) mem_info_vram_used = the driver's own VRAM + the live clients' + the releasing ones';
// (d) class/kfd/kfd/proc/<pid>/ exists while the KFD process does: shown once the driver saw
//     <pid> (alive, with the record's start time and owner) hold dev/kfd with the record's OFD
//     lock, and kept while any descriptor of that open file description is left (the open file
//     holds a reference to the kernel's KFD process: kfd_chardev.c kfd_open()/kfd_release()),
//     in a forked worker after the opener died too;
// (e) engine time grows by the client's busy share of wall time (computed when written);
// (f) writes drm/cycle, the number of completed cycles.
#pragma once

#include "drm/drm_state.hpp"

namespace gpusim::drm {

// Runs until SIGTERM/SIGINT or the parent's death; returns the exit status.
int run_driver(const DrmLayout& layout, unsigned period_ms);

}  // namespace gpusim::drm
