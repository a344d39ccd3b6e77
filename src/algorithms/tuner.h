// The tuner: picks algorithm, chunk size and channel count for one operation by predicting each
// candidate's time with the cost model (simulated plans on the communicator's machine model) and taking
// the fastest. Decisions are cached per size class (power-of-two bucket of the operation's bytes,
// decided at the bucket's upper end), so after the first call of a class a choice is a map lookup.
// One Tuner per communicator: it holds that communicator's machine and ring orderings.
//
// The candidates are the algorithm registry's entries (registry.h), in its order, each asked whether
// it serves a request before its plans are built.
//
// Overrides are fields of the request, filled by the caller from LOOM_ALGO (the rule covering the
// call: algorithm_rules.h), LOOM_CHUNK_BYTES and LOOM_NCHANNELS; the tuner reads no environment. A
// forced algorithm that cannot serve the operation (tree for AllGather, oneshot above one message,
// hier without ranksPerNode, ...) is replaced by the tuned choice, with TuneChoice::note saying so.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"
#include "algorithms/machine_model.h"
#include "base/status.h"

namespace loom {

struct TuneRequest {
  Collective coll = Collective::AllReduce;
  uint64_t count = 0;               // the API's count, as in PlanRequest
  size_t elemSize = 1;
  int root = 0;
  uint64_t slotBytes = 256 << 10;   // the transports' slot: no message may be larger
  int maxChannels = 1;              // channels the communicator has connections for
  // What the user forced; unset/0: tuned.
  std::optional<Algorithm> forcedAlgorithm;  // LOOM_ALGO's rule for this call (AlgorithmRules::forCall)
  uint64_t forcedChunkBytes = 0;             // LOOM_CHUNK_BYTES (clamped to [elemSize, slotBytes])
  int forcedChannels = 0;                    // LOOM_NCHANNELS (clamped to [1, maxChannels])
};

struct TuneChoice {
  Algorithm algorithm = Algorithm::Ring;
  uint64_t chunkElems = 1;
  int nchannels = 1;
  std::vector<std::vector<int>> rings;  // what PlanRequest::rings must be (empty: identity)
  double predictedUs = 0;               // at the size class's upper end
  std::string note;                     // why an override was not honoured; empty when it was
};

class Tuner {
 public:
  // rings: the communicator's per-channel orderings from the topology, or empty (identity on one
  // node, railRings() across nodes).
  explicit Tuner(const MachineModel& machine, std::vector<std::vector<int>> rings = {});
  // The same, sharing rings held elsewhere (a communicator's job: 16 channels x n ranks, which a copy
  // per tuner made O(n) memory per rank, O(n^2) in a process of n rank threads). Null: none.
  Tuner(const MachineModel& machine, std::shared_ptr<const std::vector<std::vector<int>>> rings);

  Status choosePlan(const TuneRequest& req, TuneChoice* choice);

  // Predicted time of `choice` for exactly req.count (loom-sim; the core has no need for it).
  Status predict(const TuneRequest& req, const TuneChoice& choice, double* us);

  // The PlanRequest that builds rank `rank`'s plan for req with choice.
  PlanRequest planRequest(const TuneRequest& req, const TuneChoice& choice, int rank) const;
  // The same into *out, whose rings keep their capacity (a steady call allocates nothing for them).
  void planRequest(const TuneRequest& req, const TuneChoice& choice, int rank, PlanRequest* out) const;

  // The machine it prices plans on (a copy: setMachine may replace it from another thread).
  MachineModel machine() const;
  // Prices plans on `machine` from now on (the device tuner's, refined once plan kernels are set up);
  // the choices made on the previous one are forgotten.
  void setMachine(const MachineModel& machine);

  // The algorithms the tuner times for req at `count` elements: the registry's entries whose tried()
  // holds, in the registry's order (public for tests and tools).
  std::vector<Algorithm> candidates(const TuneRequest& req, uint64_t count) const;

 private:
  // (collective, size class, elemSize, forced algorithm + 1 or 0, forced chunk, forced channels,
  //  max channels, slot bytes)
  using DecisionKey = std::tuple<int, int, size_t, int, uint64_t, int, int, uint64_t>;

  std::vector<std::vector<int>> ringsFor(Algorithm algo, int nchannels) const;
  Status tune(const TuneRequest& req, uint64_t count, TuneChoice* choice);

  mutable std::mutex mutex_;
  CostModel cost_;
  std::shared_ptr<const std::vector<std::vector<int>>> rings_;  // never null (may be empty)
  std::map<DecisionKey, TuneChoice> decisions_;
};

// Size class of an operation: ceil(log2(bytes)), 0 for at most one byte.
int sizeClass(uint64_t bytes);

}  // namespace loom
