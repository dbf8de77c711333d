// CLI11's classes as the command headers name them: declared here, defined only where a .cpp
// file includes <CLI/CLI.hpp>, so that a header of cli does not bring CLI11 with it.
#pragma once

namespace CLI {
class App;
class Option;
}  // namespace CLI
