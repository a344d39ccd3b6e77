// loom-sim's work: for each size of a sweep, the model's choice and predicted time (include/loom_model.h),
// reported with nccl-tests' bandwidth definitions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "loom_model.h"

namespace loom::sim_tool {

struct SweepOptions {
  loomModelCollective_t coll = loomModelAllReduce;
  uint64_t minBytes = 8, maxBytes = 8;
  double factor = 2;       // -f; used when stepBytes is 0
  uint64_t stepBytes = 0;  // -i
  int elemSize = 4;
  std::string algorithm;   // forced; "": tuned
  uint64_t chunkBytes = 0;
  int channels = 0;
};

// "all_reduce", "allreduce", "broadcast", ... (nccl-tests' binary names, with or without underscores).
bool parseCollective(const std::string& name, loomModelCollective_t* coll);

// One prediction per size (its `bytes`: nccl-tests' size in whole elements); fails with the model's
// error text.
bool runSweep(loomModel_t model, const SweepOptions& options, std::vector<loomModelPrediction_t>* rows,
              std::string* error);

std::string renderTable(const loomModelMachine_t& machine, const std::string& collName,
                        const std::vector<loomModelPrediction_t>& rows);
// A list of {bytes, algorithm, channels, chunk_bytes, time_us, algbw_gbs, busbw_gbs}.
nlohmann::json renderJson(const std::vector<loomModelPrediction_t>& rows);

}  // namespace loom::sim_tool
