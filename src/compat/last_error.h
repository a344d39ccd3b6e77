// The drop-in's own errors (a config it cannot read, a function Loom does not serve): what
// ncclGetLastError says after them. Errors found inside Loom stay Loom's (loomGetLastError); each
// export forgets the drop-in's error before it calls Loom, so the newest error wins.
#pragma once

#include <string>

#include "compat/nccl_abi.h"

namespace loom::compat {

// Records `message` for this thread and returns `code`.
ncclResult_t fail(ncclResult_t code, std::string message);
// Called at the start of each export that reaches Loom.
void forgetError();
// The drop-in's error of this thread, or nullptr when the newest error is Loom's (or none).
const char* dropInError();

}  // namespace loom::compat
