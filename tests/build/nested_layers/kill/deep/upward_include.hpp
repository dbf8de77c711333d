// A source tree for Layers.NestedUpwardIncludeIsFound, never compiled: an upward include in a
// folder inside a module (kill/deep/) that scripts/check-layers.sh must report.
#pragma once
#include "doctor/doctor.hpp"
