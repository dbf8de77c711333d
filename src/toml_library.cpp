// toml++ compiled into gpureap, once: the other files include its declarations only
// (TOML_HEADER_ONLY=0, as with the shared libtomlplusplus), so the program needs no
// libtomlplusplus.so at start-up.
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
