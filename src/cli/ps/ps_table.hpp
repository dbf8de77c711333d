// `gpureap ps` for people: a section per GPU (memory bar, processes, holders, unattributed
// memory called out), or with --tree each GPU process with its descendants and their roles.
#pragma once

#include <string>

#include "cli/ps/ps_filter.hpp"
#include "text/terminal_style.hpp"
#include "text/terminal_width.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

// Every text that came from a process, the kernel or the driver is sanitised; commands are cut
// to `width` (whole when it is unlimited: --wide or a pipe).
std::string render_ps_table(const Snapshot& snapshot, const PsFilter& filter, const TerminalStyle& style,
                            const OutputWidth& width);
std::string render_ps_tree(const Snapshot& snapshot, const PsFilter& filter, const TerminalStyle& style,
                           const OutputWidth& width);

}  // namespace gpureap
