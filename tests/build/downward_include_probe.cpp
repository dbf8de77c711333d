// The control for upward_include_probe.cpp: the same kind of compile, as part of the kill
// module, of a header from a module below it. Layers.DownwardIncludeCompiles expects success,
// so the upward test cannot pass for an unrelated reason (a broken probe, a missing target).
#include "snapshot/snapshot.hpp"
#include "text/human_format.hpp"

int gpureap_layering_probe_downward() { return 0; }
