// loom._C's precompiled header (meson's cpp_pch): torch's headers, which are most of each source's
// compile time, parsed once per build instead of once per source.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
