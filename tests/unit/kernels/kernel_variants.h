// The kernels under test: the library's public entry points (whose ifunc picks one instruction-set build
// for this CPU) and, compiled here from the same templates, each build this CPU can run, so that the
// AVX-512, AVX2 and baseline code paths are all checked on one machine.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/cpu/reduce.h"

namespace loomtest {

struct KernelVariant {
  const char* name;
  void (*reduce)(void* dst, const void* a, const void* b, size_t count, loomDataType_t dtype,
                 const loom::ReduceOp& op, bool finalize);
  void (*copy)(void* dst, const void* src, size_t count, loomDataType_t dtype, const loom::ReduceOp& op,
               bool finalize);
  // The block conversions of a narrow float dtype; null for the public entry points, which have none.
  void (*decode)(loomDataType_t dtype, const void* src, float* out, size_t count);
  void (*encode)(loomDataType_t dtype, const float* in, void* dst, size_t count);
};

// Public entry points first, then the builds this CPU supports.
std::vector<KernelVariant> kernelVariants();

}  // namespace loomtest
