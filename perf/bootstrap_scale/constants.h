// bootstrap-scale --constants: the bootstrap cost model's constants (src/model/bootstrap_model.h)
// measured on this host, each on the library's own code path for that step, as CPU time (both ends of a
// connection or message counted, as the model counts them).
#pragma once

#include "model/bootstrap_model.h"

namespace loom::bootstrap_scale {

loom::model::BootstrapConstants measureConstants();

// CPU seconds so far, every thread's: of this process (RUSAGE_SELF) or of its children waited for
// (RUSAGE_CHILDREN).
double processCpuSeconds(int who);

}  // namespace loom::bootstrap_scale
