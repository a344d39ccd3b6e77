// A job's cost model: for any group of a job's ranks, what a communicator of exactly those ranks would
// choose and how long it would take, on hosts a topology describes (or no topology: the machine fields
// alone). The one assembly of "ranks -> job topology -> machine model -> tuner" outside a live
// communicator: modelJob (topology/job_topology.h) runs the steps a communicator's init runs without
// the exchanges, each member placed on the GPU its job rank stands for; then the machine from
// jobMachine, and the choice and time from the tuner's simulated plans. include/loom_model.h is its C
// API (loom-sim and the Python planner use it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/algorithm_rules.h"
#include "algorithms/builders.h"
#include "algorithms/machine_model.h"
#include "algorithms/tuner.h"
#include "base/status.h"
#include "model/machine_fields.h"
#include "topology/graph.h"

namespace loom::model {

enum class MemoryChoice { Auto, Host, Device };

struct JobModelOptions {
  int world = 1;
  int ranksPerNode = 0;      // 0: the topology's GPU count when it divides world, else one node
  std::string topology;      // "": LOOM_TOPO_FILE or the live machine; "none": no topology; else a file
  MemoryChoice memory = MemoryChoice::Auto;
  double nvswitchGbs = 0;    // > 0: add an NVSwitch at this rate per GPU (topology/nvswitch_option.h)
  MachineFields machine;     // set after the topology's values
  int maxChannels = 0;       // 0: 16 device; host: a communicator's default (LOOM_NCHANNELS's)
  uint64_t slotBytes = 0;    // 0: a communicator's default (LOOM_CHUNK_BYTES's, 128 KiB)
  std::string calibrationFile;  // host memory: LOOM_CALIBRATION_FILE's format; "": measured or copy_gbs
};

struct CollectiveQuery {
  Collective coll = Collective::AllReduce;
  uint64_t bytes = 0;         // nccl-tests' size (every rank's block for the block collectives)
  size_t elemBytes = 4;
  std::vector<int> ranks;     // job ranks; empty: the whole job
  bool concurrent = true;     // every group of this shape runs at once and they share the NICs
  int root = 0;               // index in the group
  AlgorithmRules algorithms;  // forced ones, as LOOM_ALGO's rules (matched against the whole elements' bytes)
  int channels = 0;
  uint64_t chunkBytes = 0;
};

struct Prediction {
  double timeUs = 0;
  std::string algorithm = "none";
  int channels = 0;
  uint64_t chunkBytes = 0;
  uint64_t count = 0;  // elements per rank as the API counts them
  uint64_t bytes = 0;  // the query's size in whole elements (count x element size, x ranks for blocks)
  double algbwGbs = 0, busbwGbs = 0;
  std::string note;    // a forced choice the tuner could not honour
};

class JobModel {
 public:
  static Status create(const JobModelOptions& options, std::unique_ptr<JobModel>* out);

  Status predict(const CollectiveQuery& query, Prediction* out);
  // Microseconds until every (src, dst) pair's message of `bytes` arrived, all sent at once.
  Status pointToPoint(uint64_t bytes, const std::vector<std::pair<int, int>>& pairs, size_t elemBytes,
                      bool concurrent, double* us);
  // The machine model the group `ranks` (empty: the whole job) is timed on.
  Status machineOf(std::vector<int> ranks, bool concurrent, MachineModel* out);

  int world() const { return world_; }
  int ranksPerNode() const { return ranksPerNode_; }
  bool device() const { return device_; }
  int maxChannels() const { return maxChannels_; }
  uint64_t slotBytes() const { return slotBytes_; }
  const std::string& source() const { return source_; }

 private:
  struct Group {
    MachineModel machine;
    std::unique_ptr<Tuner> tuner;
    std::map<int, int> index;  // job rank -> rank in the group
  };

  JobModel() = default;
  Status group(std::vector<int> ranks, bool concurrent, Group** out);
  Status build(const std::map<int, std::vector<int>>& perNode, bool concurrent, std::unique_ptr<Group>* out);

  int world_ = 1;
  int ranksPerNode_ = 1;
  bool device_ = false;
  int maxChannels_ = 2;
  uint64_t slotBytes_ = 0;
  int fifoSlots_ = 0;  // device memory: the plan kernels' FIFOs' slots (0: the machine's, a host communicator's)
  double copyGbs_ = 0;
  MachineFields fields_;
  std::string source_ = "none";
  std::unique_ptr<SystemGraph> graph_;
  std::map<std::string, std::unique_ptr<Group>> groups_;  // by the members' local indices per node
};

}  // namespace loom::model
