// --name: look like another program in ps, /proc/<pid>/comm and /proc/<pid>/cmdline.
#pragma once

#include <string>

namespace gpusim::cuda {

// If argv[0] is not `name` yet, re-executes /proc/self/exe with argv[0] = name (the only way
// to change /proc/<pid>/cmdline's first word cleanly); returns only on failure. Afterwards
// sets comm to name's basename (the kernel would set "exe"). No-op for an empty name.
void adopt_process_name(const std::string& name, int argc, char** argv);

}  // namespace gpusim::cuda
