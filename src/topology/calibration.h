// How fast this machine moves host memory the way Loom's shared-memory transport does: one thread
// copies 256 KiB messages into a ring of FIFO slots while another copies them out, so the figure
// includes what crossing between cores costs, not only memcpy. It becomes the cost model's per-rank
// copy rate and intra-node rate for host memory (algorithms/machine_model.h). Read from
// LOOM_CALIBRATION_FILE (which `loom-topo --calibrate` writes after a longer measurement), else from
// the host cache (host_cache.h), else measured at a process's first communicator init (about 20 ms)
// and kept there, so that a host's processes agree run after run. The ranks of a job take the slowest
// rank's figure, so that they all choose the same plans.
#pragma once

#include <string>

#include "base/status.h"
#include "base/tools_api.h"

namespace loom {

struct Calibration {
  double copyGbs = 0;  // GB/s (1e9 bytes) through the FIFO, rounded to two significant digits
  std::string source;  // "measured" or the file it was read from
};

// `rounds` measurements of `bytes` each after one warm-up; their median.
LOOM_TOOLS_API Status measureCalibration(size_t bytes, int rounds, Calibration* out);

// This process's calibration: LOOM_CALIBRATION_FILE when set (an unreadable or malformed file is an
// error naming it), else the host cache's, else measured and cached (later calls return the same).
LOOM_TOOLS_API Status processCalibration(Calibration* out);

// The JSON file `loom-topo --calibrate` writes: {"copy_gbs": X}.
Status readCalibrationFile(const std::string& path, Calibration* out);
LOOM_TOOLS_API Status writeCalibrationFile(const std::string& path, const Calibration& calibration);

}  // namespace loom
