// loom-sim's work: for each size of a sweep, the tuner's choice on a modelled machine and its predicted
// time, reported with nccl-tests' bandwidth definitions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/machine_model.h"
#include "base/status.h"

namespace loom::sim_tool {

struct SweepOptions {
  Collective coll = Collective::AllReduce;
  uint64_t minBytes = 8, maxBytes = 8;
  double factor = 2;       // -f; used when stepBytes is 0
  uint64_t stepBytes = 0;  // -i
  size_t elemSize = 4;
  uint64_t slotBytes = 256 << 10;
  int maxChannels = 16;
  std::optional<Algorithm> algorithm;
  uint64_t chunkBytes = 0;
  int channels = 0;
  std::vector<std::vector<int>> rings;  // the job's rings (topology/job_topology.h); empty: the tuner's own
};

struct SweepRow {
  uint64_t bytes = 0;  // nccl-tests' size: the larger of the send and receive buffers
  uint64_t count = 0;  // elements, as the API counts them
  std::string algorithm;
  int channels = 0;
  uint64_t chunkBytes = 0;
  double timeUs = 0;
  double algbwGbs = 0;
  double busbwGbs = 0;
  std::string note;  // an override the tuner could not honour
};

// "all_reduce", "allreduce", "broadcast", ... (nccl-tests' binary names, with or without underscores).
bool parseCollective(const std::string& name, Collective* coll);
// 8, 64K, 1M, 4G (powers of 1024), optionally followed by B.
bool parseBytes(const std::string& text, uint64_t* bytes);
// nccl-tests' bus bandwidth factor: 2(n-1)/n for AllReduce, (n-1)/n for AllGather, ReduceScatter,
// AlltoAll, Gather and Scatter, 1 for Broadcast and Reduce.
double busFactor(Collective coll, int nranks);

Status runSweep(const MachineModel& machine, const SweepOptions& options, std::vector<SweepRow>* rows);

std::string renderTable(const MachineModel& machine, const SweepOptions& options, const std::vector<SweepRow>& rows);
// A list of {bytes, algorithm, channels, time_us, algbw_gbs, busbw_gbs}.
nlohmann::json renderJson(const std::vector<SweepRow>& rows);

}  // namespace loom::sim_tool
