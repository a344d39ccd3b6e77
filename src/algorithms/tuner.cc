#include "algorithms/tuner.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <set>
#include <utility>

#include "algorithms/rail_rings.h"
#include "algorithms/registry.h"

namespace loom {
namespace {

// A candidate must be this much faster than the best so far to replace it, so that near ties keep the
// earlier (simpler) choice; searches along channels and chunk sizes stop once this much worse.
constexpr double kBetter = 0.999;
constexpr double kGiveUp = 1.05;
constexpr uint64_t kSmallestChunkBytes = 4096;
constexpr int kChunkCandidates = 4;  // slot, slot/4, slot/16, slot/64

std::vector<uint64_t> chunkCandidates(const TuneRequest& req) {
  const uint64_t slot = std::max<uint64_t>(req.slotBytes, req.elemSize);
  if (req.forcedChunkBytes > 0)
    return {std::clamp<uint64_t>(req.forcedChunkBytes, req.elemSize, slot) / req.elemSize};
  std::vector<uint64_t> chunks;
  uint64_t bytes = slot;
  for (int i = 0; i < kChunkCandidates; ++i, bytes /= 4) {
    if (i > 0 && bytes < std::max<uint64_t>(kSmallestChunkBytes, req.elemSize)) break;
    chunks.push_back(bytes / req.elemSize);
  }
  return chunks;
}

std::vector<int> channelCandidates(const TuneRequest& req) {
  const int most = std::max(1, req.maxChannels);
  if (req.forcedChannels > 0) return {std::clamp(req.forcedChannels, 1, most)};
  std::vector<int> channels;
  for (int c = 1; c < most; c *= 2) channels.push_back(c);
  channels.push_back(most);
  return channels;
}

}  // namespace

int sizeClass(uint64_t bytes) { return bytes <= 1 ? 0 : std::bit_width(bytes - 1); }

Tuner::Tuner(const MachineModel& machine, std::vector<std::vector<int>> rings)
    : Tuner(machine, std::make_shared<const std::vector<std::vector<int>>>(std::move(rings))) {}

Tuner::Tuner(const MachineModel& machine, std::shared_ptr<const std::vector<std::vector<int>>> rings)
    : cost_(machine), rings_(rings ? std::move(rings) : std::make_shared<const std::vector<std::vector<int>>>()) {}

MachineModel Tuner::machine() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cost_.machine();
}

void Tuner::setMachine(const MachineModel& machine) {
  std::lock_guard<std::mutex> lock(mutex_);
  cost_ = CostModel(machine);
  decisions_.clear();
}

std::vector<Algorithm> Tuner::candidates(const TuneRequest& req, uint64_t count) const {
  // The registry's entries the tuner times for this shape, in its order; judged at the largest chunk
  // (the slot) and one channel, as the search starts.
  TuneRequest rep = req;
  rep.count = count;
  TuneChoice probe;
  probe.chunkElems = std::max<uint64_t>(1, req.slotBytes / req.elemSize);
  const PlanRequest pr = planRequest(rep, probe, 0);
  std::vector<Algorithm> algos;
  for (const AlgorithmEntry& entry : algorithmRegistry())
    if (entry.tried(pr)) algos.push_back(entry.id);
  return algos;
}

std::vector<std::vector<int>> Tuner::ringsFor(Algorithm algo, int nchannels) const {
  switch (algorithmEntry(algo).rings) {
    case RingOrders::None: return {};
    // Trees serve small messages, where one ordering for all channels (tree edges stay inside nodes at
    // the lower levels) costs nothing.
    case RingOrders::Communicator: return *rings_;
    // Rings spread inter-node traffic over the rails.
    case RingOrders::CommunicatorOrRails:
      if (!rings_->empty()) return *rings_;
      return railRings(cost_.machine().nranks, cost_.machine().ranksPerNode, nchannels);
  }
  return {};
}

PlanRequest Tuner::planRequest(const TuneRequest& req, const TuneChoice& choice, int rank) const {
  PlanRequest pr;
  planRequest(req, choice, rank, &pr);
  return pr;
}

void Tuner::planRequest(const TuneRequest& req, const TuneChoice& choice, int rank, PlanRequest* out) const {
  PlanRequest& pr = *out;
  pr.coll = req.coll;
  pr.nranks = cost_.machine().nranks;
  pr.rank = rank;
  pr.root = req.root;
  pr.count = req.count;
  pr.elemSize = req.elemSize;
  pr.chunkElems = choice.chunkElems;
  pr.nchannels = choice.nchannels;
  pr.rings = choice.rings;  // element by element: the vectors' capacity is kept
  pr.ranksPerNode = cost_.machine().ranksPerNode;
  pr.peerMemory = cost_.machine().peerMemory;
}

Status Tuner::tune(const TuneRequest& req, uint64_t count, TuneChoice* choice) {
  TuneRequest rep = req;
  rep.count = count;
  rep.root = 0;  // machines are symmetric: a root's rank does not change the choice
  std::vector<Algorithm> algos = candidates(req, count);
  const MachineModel& m = cost_.machine();
  std::string note;
  if (req.forcedAlgorithm) {
    const AlgorithmEntry& forced = algorithmEntry(*req.forcedAlgorithm);
    TuneChoice probe;
    probe.algorithm = forced.id;
    probe.chunkElems = chunkCandidates(req).front();
    probe.nchannels = channelCandidates(req).front();
    probe.rings = ringsFor(forced.id, probe.nchannels);
    const PlanRequest pr = planRequest(rep, probe, 0);
    if (forced.serves(pr)) {
      algos = {forced.id};
    } else {
      // The builder's refusal says why (builders refuse before they build anything).
      Plan refused;
      const Status why = forced.build(pr, &refused);
      note = fmt::format("{} does not apply here ({}); using the tuned choice", forced.name,
                         why.ok() ? "its registry entry does not serve this request" : why.message());
    }
  }
  double best = std::numeric_limits<double>::infinity();
  bool found = false;
  for (Algorithm algo : algos) {
    const AlgorithmEntry& entry = algorithmEntry(algo);
    double bestOfAlgo = std::numeric_limits<double>::infinity();
    std::vector<uint64_t> chunks = chunkCandidates(req);
    std::vector<int> channels = channelCandidates(req);
    // One message per peer on one lane (one-shot): chunk and channels change nothing.
    if (entry.oneMessage) {
      chunks.resize(1);
      channels.resize(1);
    }
    std::set<std::pair<uint64_t, int>> seen;
    for (uint64_t chunk : chunks) {
      double bestOfChunk = std::numeric_limits<double>::infinity();
      for (int nch : channels) {
        if (nch > 1 && req.forcedChannels == 0 && m.minChannelBytes > 0 &&
            count * req.elemSize < static_cast<uint64_t>(nch) * m.minChannelBytes)
          break;  // channels only grow from here
        // Channels past the element count stay empty and chunks past a channel's share change
        // nothing: such candidates build the plans of a smaller one.
        const int usedChannels = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(nch), count));
        const uint64_t usedChunk = std::min(chunk, (count + usedChannels - 1) / usedChannels);
        if (!seen.emplace(usedChunk, usedChannels).second) continue;
        TuneChoice c;
        c.algorithm = algo;
        c.chunkElems = usedChunk;
        c.nchannels = usedChannels;
        c.rings = ringsFor(algo, usedChannels);
        const PlanRequest pr = planRequest(rep, c, 0);
        if (!entry.serves(pr)) break;  // one-shot with a forced chunk below its count: more channels cannot help
        double bound = 0;
        if (!cost_.lowerBound(algo, pr, &bound).ok()) break;
        if (bound >= best) break;  // more channels only add steps
        double t = 0;
        LOOM_TRY(cost_.predict(algo, pr, &t).withContext(fmt::format("tuner: {} chunk {} channels {}",
                                                                      algorithmName(algo), chunk, nch)));
        if (!found || t < best * kBetter) {
          best = t;
          c.predictedUs = t;
          *choice = std::move(c);
          found = true;
        }
        if (t > bestOfChunk * kGiveUp) break;
        bestOfChunk = std::min(bestOfChunk, t);
      }
      if (bestOfChunk > bestOfAlgo * kGiveUp) break;
      bestOfAlgo = std::min(bestOfAlgo, bestOfChunk);
    }
  }
  if (!found) return internalError("tuner: no algorithm serves {} of {} element(s)", collectiveName(req.coll), count);
  choice->note = note;
  return Status::Ok();
}

Status Tuner::choosePlan(const TuneRequest& req, TuneChoice* choice) {
  if (req.elemSize == 0) return invalidArgument("tuner: elemSize must be at least 1");
  const MachineModel& m = cost_.machine();
  if (req.count == 0 || m.nranks == 1) {
    // Nothing moves between ranks: any builder gives the same (empty or single-copy) plan.
    *choice = TuneChoice{};
    choice->chunkElems = std::max<uint64_t>(1, req.slotBytes / req.elemSize);
    // A forced algorithm is not used: some cannot build these shapes (hier without nodes, oneshot
    // above one message) and none would move anything.
    if (!algorithmEntry(Algorithm::Ring).collectives.has(req.coll)) choice->algorithm = Algorithm::Direct;
    return Status::Ok();
  }
  const int cls = sizeClass(req.count * req.elemSize);
  const DecisionKey key{static_cast<int>(req.coll), cls, req.elemSize,
                        req.forcedAlgorithm ? static_cast<int>(*req.forcedAlgorithm) + 1 : 0, req.forcedChunkBytes,
                        req.forcedChannels, req.maxChannels, req.slotBytes};
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = decisions_.find(key); it != decisions_.end()) {
    *choice = it->second;
    return Status::Ok();
  }
  // The class's upper end: every count of the class fits what is decided for it (one-shot included).
  const uint64_t top = (cls >= 63 ? req.count * req.elemSize : (uint64_t{1} << cls)) / req.elemSize;
  TuneChoice decided;
  LOOM_TRY(tune(req, std::max(top, req.count), &decided));
  decisions_.emplace(key, decided);
  *choice = std::move(decided);
  return Status::Ok();
}

Status Tuner::predict(const TuneRequest& req, const TuneChoice& choice, double* us) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (req.count == 0 || cost_.machine().nranks == 1) {
    *us = 0;
    return Status::Ok();
  }
  return cost_.predict(choice.algorithm, planRequest(req, choice, 0), us);
}

}  // namespace loom
