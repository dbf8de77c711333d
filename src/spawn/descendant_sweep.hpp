// Ending everything a program started, setsid'd daemons included. The program runs under a
// keeper: a small process of gpureap's (the child between gpureap and the program) that is a
// child subreaper (PR_SET_CHILD_SUBREAPER), so every orphan the program leaves, however
// many times it forked or whichever session it made, becomes the keeper's child instead of
// init's. When the program ends or its deadline passes, the keeper ends and reaps all its
// children until it has none: nothing the program started outlives it. A process group could
// not do this (setsid leaves it); a cgroup would need one per run and a delegated subtree.
// Async-signal-safe: the keeper runs between fork and exit of a copy of gpureap.
#pragma once

namespace gpureap::spawn_child {

// Sends SIGKILL to every child of the calling (single-threaded) process, as
// /proc/thread-self/children lists them, reaps one, and repeats until it has no child:
// a child's own children become ours as it dies, and are listed next time round. false when
// the kernel has no children file (CONFIG_PROC_CHILDREN): then only the children that have
// already exited are reaped, and the living are left (the caller says so).
bool end_all_children();

}  // namespace gpureap::spawn_child
