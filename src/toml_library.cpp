// toml++ compiled into gpureap, once: the other files include its declarations only
// (TOML_HEADER_ONLY=0, as with the shared libtomlplusplus), so the program needs no
// libtomlplusplus.so at start-up.
//
// Its internal assertions stay off in every build, as in the distribution's shared library
// that gpureap used before: toml++ 3.3 asserts in parse_key() on some malformed keys (found
// by fuzz/kill_config_fuzz), which a debug or sanitizer build would otherwise turn into an
// abort instead of the parse error that gpureap reports.
#define TOML_ASSERT(expr) static_cast<void>(0)
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
