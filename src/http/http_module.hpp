// Finding and loading gpureap's HTTP module (gpureap-http.so, http_module_abi.hpp) for the
// commands that speak HTTP: export's server, fleet's client.
#pragma once

#include <string>
#include <vector>

#include "http/http_module_abi.hpp"

namespace gpureap {

// The module's entry table: from `module_path` when given (tests), else from the first of
// http_module_candidates() that exists. nullptr, with one line in `error` (sanitised), when it
// is missing, does not load, or belongs to another gpureap version. Loaded once per path and
// never unloaded: its threads and its C++ runtime must outlive every server and client.
const gpureap_http_module_api* load_http_module(const std::string& module_path, std::string& error);

// Where the module is looked for, in order: beside the gpureap binary (a build tree), in the
// library directory beside the binary's bin/ of each package (the .deb's lib/<multiarch>, the
// RPM's lib64, the tarball's lib: wherever it is unpacked), and where this build installs it.
// Never a path from the environment: gpureap runs as root.
std::vector<std::string> http_module_candidates();

}  // namespace gpureap
