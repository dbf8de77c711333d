// gpureap: find, explain and end whatever holds GPU memory.
#include "cli/command_line.hpp"

int main(int argc, char** argv) { return gpureap::run_command_line(argc, argv); }
