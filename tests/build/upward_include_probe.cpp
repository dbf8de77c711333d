// Compiled as part of the kill module by the Layers.UpwardIncludeFails test, which expects the
// compile to FAIL: kill sits below doctor, so doctor's headers are not on its include path.
#include "doctor/doctor.hpp"

int gpureap_layering_probe_upward() { return 0; }
