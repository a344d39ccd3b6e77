// LOOM_IB_HCA, with NCCL_IB_HCA's syntax: a comma list of <device>[:<port>[:<rail>[:<plane>]]]. Names are
// prefixes (mlx5_1 also matches mlx5_10..19) unless the list starts with '='; a leading '^' (before
// any '=') excludes the listed ports instead of selecting them. An empty port (mlx5_0::0) or none means
// every port. Rails and planes are accepted and ignored (one device per connection here). At most 32
// entries, as NCCL.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace loom::net::ib {

struct HcaFilter {
  struct Entry {
    std::string device;
    int port = -1;  // -1: every port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;  // empty: everything matches

  bool matches(const std::string& device, int port) const;
};

inline constexpr size_t kMaxHcaEntries = 32;

Status parseHcaFilter(const std::string& spec, HcaFilter* out);

}  // namespace loom::net::ib
