// nccl-tests' text report (header, table, footer) and the --json rows. Only global rank 0 reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "options.h"

namespace loomperf {

struct Measurement {
  double timeUs;
  double algBw;  // GB/s, 1e9 bytes
  double busBw;
  int64_t wrong;  // summed over ranks; -1 when not checked
  // --percentiles: over the timed iterations, each the slowest rank's time per operation; else -1.
  double p50Us = -1, p99Us = -1, maxUs = -1;
  // LOOM_DEVICE_PROFILE=1 with -G cuda: what the plan kernels' lanes of every rank timed over the timed
  // iterations (loomCommDeviceProfile, summed over ranks); launches 0 otherwise.
  loomDeviceProfile_t profile = {};
};

struct ResultRow {
  size_t bytes;
  size_t count;
  loomDataType_t type;
  RedOp op;
  int root;  // -1 for collectives without one
  Measurement outOfPlace;
  Measurement inPlace;
};

class Report {
 public:
  Report(const Options& options, int nranks);

  void header(const std::vector<std::string>& rankLines);
  void row(const ResultRow& row);
  // Prints the footer and writes the JSON file; returns false when the file could not be written.
  bool finish();

 private:
  void addJson(const ResultRow& row, const Measurement& m, bool inPlace);
  void printProfile(const Measurement& m, const char* which);

  const Options& options_;
  int nranks_;
  nlohmann::json rows_ = nlohmann::json::array();
  double busBwSum_ = 0;
  int busBwCount_ = 0;
  int64_t wrong_ = 0;
};

}  // namespace loomperf
