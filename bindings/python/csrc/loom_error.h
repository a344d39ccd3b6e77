// Turns Loom result codes into C++ exceptions that torch shows as Python exceptions, carrying
// Loom's own text (loomGetErrorString + loomGetLastError).
#pragma once

#include <exception>
#include <string>

#include <loom.h>

namespace loomtorch {

// Invalid arguments and usage become c10::Error (Python RuntimeError); failures of the
// communication itself (remote error, timeout, system) become c10::DistBackendError
// (torch.distributed.DistBackendError, also a RuntimeError).
std::exception_ptr loomError(loomResult_t result, const std::string& what, const std::string& detail);

// For a call made on this thread: Loom keeps its last error per thread.
void checkCall(loomResult_t result, const char* what);

// For a failure seen through loomCommWaitOp: the communicator keeps its last error.
std::exception_ptr commError(loomResult_t result, const std::string& what, loomComm_t comm);

[[noreturn]] void throwError(std::exception_ptr error);

}  // namespace loomtorch
