#include "model/job_model.h"

#include <algorithm>
#include <fmt/format.h>

#include "algorithms/plan_simulator.h"
#include "device/fifo_layout.h"
#include "topology/calibration.h"
#include "topology/job_topology.h"
#include "topology/nvswitch_option.h"
#include "topology/topology_file.h"

namespace loom::model {
namespace {

// The latency per hop of a modelled machine without a topology: loom-sim's long-standing default.
constexpr double kNoTopologyLatencyUs = 2.0;

// nccl-tests' bus bandwidth factor: 2(n-1)/n for AllReduce, (n-1)/n for AllGather, ReduceScatter,
// AlltoAll, Gather and Scatter, 1 for Broadcast and Reduce.
double busFactor(Collective coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case Collective::AllReduce: return 2 * (n - 1) / n;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AlltoAll:
    case Collective::Gather:
    case Collective::Scatter: return (n - 1) / n;
    default: return 1;
  }
}

}  // namespace

Status JobModel::create(const JobModelOptions& o, std::unique_ptr<JobModel>* out) {
  if (o.world < 1) return invalidArgument("model: world {} must be at least 1", o.world);
  if (o.ranksPerNode < 0) return invalidArgument("model: ranksPerNode {} must not be negative", o.ranksPerNode);
  if (o.maxChannels < 0 || o.maxChannels > 256) return invalidArgument("model: maxChannels {} is not 0..256", o.maxChannels);
  LOOM_TRY(checkMachineFields(o.machine));
  std::unique_ptr<JobModel> m(new JobModel());
  m->world_ = o.world;
  m->fields_ = o.machine;
  int ranksPerNode = o.ranksPerNode;
  if (o.topology != "none") {
    auto graph = std::make_unique<SystemGraph>();
    LOOM_TRY((o.topology.empty() ? loadSystemTopology(graph.get()) : loadTopologyFile(o.topology, graph.get()))
                 .withContext("model: topology"));
    if (o.nvswitchGbs > 0) {
      auto joined = std::make_unique<SystemGraph>();
      LOOM_TRY(withNvSwitch(*graph, o.nvswitchGbs, joined.get()).withContext("model"));
      graph = std::move(joined);
    }
    if (ranksPerNode == 0 && graph->gpuCount() > 0 && o.world % graph->gpuCount() == 0) ranksPerNode = graph->gpuCount();
    m->source_ = graph->source;
    m->graph_ = std::move(graph);
  } else if (o.nvswitchGbs > 0) {
    return invalidArgument("model: an added NVSwitch needs a topology (intra_gbs sets the fabric of a machine without one)");
  }
  m->ranksPerNode_ = ranksPerNode <= 0 || ranksPerNode > o.world ? o.world : ranksPerNode;
  if (o.world % m->ranksPerNode_)
    return invalidArgument("model: {} ranks per node do not divide the {} ranks of the job", m->ranksPerNode_, o.world);
  const SystemGraph* g = m->graph_.get();
  m->device_ = o.memory == MemoryChoice::Device || (o.memory == MemoryChoice::Auto && (!g || g->gpuCount() > 0));
  if (g && m->device_ && g->gpuCount() == 0)
    return invalidArgument("model: device memory on a topology without GPUs ({})", g->source);
  m->maxChannels_ = o.maxChannels > 0 ? o.maxChannels : (m->device_ ? 16 : static_cast<int>(settingDefaultInt(Setting::NChannels)));
  // A default communicator's slots: its host transports', or for device memory its plan kernels' FIFOs
  // as their setup lays them out for this job (device/fifo_layout.h).
  m->slotBytes_ = static_cast<uint64_t>(settingDefaultInt(Setting::ChunkBytes));
  if (m->device_) {
    device::DeviceFifoLayout asked;
    asked.nslots = static_cast<uint32_t>(settingDefaultInt(Setting::DeviceFifoSlots));
    asked.slotBytes = static_cast<size_t>(settingDefaultInt(Setting::DeviceChunkBytes));
    asked.fit = true;
    asked.acrossHostsNslots = static_cast<uint32_t>(settingDefaultInt(Setting::FifoSlots));
    asked.acrossHostsSlotBytes = static_cast<size_t>(m->slotBytes_);
    const device::DeviceFifoLayout l =
        device::layoutForJob(asked, static_cast<size_t>(o.world / m->ranksPerNode_), static_cast<size_t>(m->ranksPerNode_),
                             static_cast<uint32_t>(settingDefaultInt(Setting::DeviceNChannels)));
    m->slotBytes_ = l.slotBytes;
    m->fifoSlots_ = static_cast<int>(l.nslots);
  }
  if (o.slotBytes > 0) m->slotBytes_ = o.slotBytes;
  if (!m->device_ && g) {
    Calibration calibration;
    auto copy = o.machine.find("copy_gbs");
    if (copy != o.machine.end()) calibration.copyGbs = copy->second;
    else if (!o.calibrationFile.empty()) LOOM_TRY(readCalibrationFile(o.calibrationFile, &calibration));
    else LOOM_TRY(processCalibration(&calibration).withContext("model: host-memory calibration"));
    m->copyGbs_ = calibration.copyGbs;
  }
  *out = std::move(m);
  return Status::Ok();
}

Status JobModel::group(std::vector<int> ranks, bool concurrent, Group** out) {
  if (ranks.empty()) {
    ranks.resize(static_cast<size_t>(world_));
    for (int r = 0; r < world_; ++r) ranks[static_cast<size_t>(r)] = r;
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::map<int, std::vector<int>> perNode;  // node -> local indices
  for (int r : ranks) {
    if (r < 0 || r >= world_) return invalidArgument("model: rank {} is outside the job of {} ranks", r, world_);
    perNode[r / ranksPerNode_].push_back(r % ranksPerNode_);
  }
  const size_t m = perNode.begin()->second.size();
  for (const auto& [node, locals] : perNode)
    if (locals.size() != m)
      return invalidArgument("model: the group has {} ranks on node {} but {} on node {}", locals.size(), node, m,
                             perNode.begin()->first);
  // Nodes are alike, so which nodes does not matter: the members' local indices on each does.
  std::string key = concurrent ? "c" : "";
  for (const auto& [node, locals] : perNode) {
    key += "|";
    for (int local : locals) key += std::to_string(local) + ",";
  }
  auto it = groups_.find(key);
  if (it == groups_.end()) {
    std::unique_ptr<Group> built;
    LOOM_TRY(build(perNode, concurrent, &built));
    it = groups_.emplace(key, std::move(built)).first;
  }
  Group& g = *it->second;
  g.index.clear();
  for (size_t i = 0; i < ranks.size(); ++i) g.index[ranks[i]] = static_cast<int>(i);
  *out = &g;
  return Status::Ok();
}

Status JobModel::build(const std::map<int, std::vector<int>>& perNode, bool concurrent, std::unique_ptr<Group>* out) {
  const int nodes = static_cast<int>(perNode.size());
  const int m = static_cast<int>(perNode.begin()->second.size());
  const int n = nodes * m;
  auto g = std::make_unique<Group>();
  std::vector<std::vector<int>> rings;
  if (graph_) {
    // The communicator's init without the exchanges: each member placed on the GPU its job rank stands
    // for, each node's channels chosen, the job assembled.
    std::vector<std::vector<int>> hostSlots;
    for (const auto& [node, locals] : perNode) hostSlots.push_back(locals);
    JobTopology job;
    LOOM_TRY(modelJob(*graph_, hostSlots, copyGbs_, &job).withContext("model: job topology"));
    g->machine = jobMachine(job, device_ ? MemorySide::Device : MemorySide::Host);
    if (fifoSlots_ > 0) g->machine.fifoSlots = fifoSlots_;
    rings = job.rings;
  } else {
    const int perNodeRanks = nodes > 1 ? m : 0;
    // The machine fields alone: no launch term unless launch_us is given (a GPU's costs come with a
    // topology that has GPUs).
    g->machine = device_ ? defaultMachine(n, perNodeRanks) : hostMemoryMachine(n, perNodeRanks);
    if (fifoSlots_ > 0) g->machine.fifoSlots = fifoSlots_;
    if (device_) g->machine.intraLatencyUs = g->machine.netLatencyUs = kNoTopologyLatencyUs;
  }
  applyMachineFields(fields_, &g->machine);
  if (concurrent && nodes > 1) {
    // ranksPerNode_ / m groups of this shape share each node's NICs; the model gives this one
    // min(m, NICs) of them at full rate.
    const double nics = g->machine.nicsPerNode;
    const double share = nics * m / ranksPerNode_ / std::min<double>(m, nics);
    if (share < 1) g->machine.nicGbs *= share;
  }
  LOOM_TRY(g->machine.validate().withContext("model"));
  g->tuner = std::make_unique<Tuner>(g->machine, rings);
  *out = std::move(g);
  return Status::Ok();
}

Status JobModel::predict(const CollectiveQuery& q, Prediction* out) {
  if (q.elemBytes < 1) return invalidArgument("model: elemBytes must be at least 1");
  if (q.coll == Collective::SendRecv) return invalidArgument("model: send/recv is a point-to-point transfer, not a collective");
  Group* g = nullptr;
  LOOM_TRY(group(q.ranks, q.concurrent, &g));
  const int n = g->machine.nranks;
  if (q.root < 0 || q.root >= n) return invalidArgument("model: root {} is not a rank of the group of {}", q.root, n);
  *out = Prediction();
  // nccl-tests' size counts every rank's block for some: count = size / (nranks * elemSize) there.
  const uint64_t unit = q.elemBytes * (sizeCountsEveryBlock(q.coll) ? static_cast<uint64_t>(n) : 1);
  out->count = q.bytes / unit;
  out->bytes = out->count * unit;
  if (n == 1 || out->count == 0) return Status::Ok();
  TuneRequest req;
  req.coll = q.coll;
  req.count = out->count;
  req.elemSize = q.elemBytes;
  req.root = q.root;
  req.slotBytes = slotBytes_;
  req.maxChannels = maxChannels_;
  req.forcedAlgorithm = q.algorithms.forCall(q.coll, out->bytes);  // a communicator's callBytes of this call
  req.forcedChunkBytes = q.chunkBytes;
  req.forcedChannels = q.channels;
  TuneChoice choice;
  const std::string what = fmt::format("model: {} of {} bytes", collectiveName(q.coll), q.bytes);
  LOOM_TRY(g->tuner->choosePlan(req, &choice).withContext(what));
  LOOM_TRY(g->tuner->predict(req, choice, &out->timeUs).withContext(what));
  out->algorithm = algorithmName(choice.algorithm);
  out->channels = choice.nchannels;
  out->chunkBytes = choice.chunkElems * q.elemBytes;
  out->algbwGbs = out->timeUs > 0 ? static_cast<double>(out->bytes) / (out->timeUs * 1e3) : 0;  // GB/s, us
  out->busbwGbs = out->algbwGbs * busFactor(q.coll, n);
  out->note = choice.note;
  return Status::Ok();
}

Status JobModel::pointToPoint(uint64_t bytes, const std::vector<std::pair<int, int>>& pairs, size_t elemBytes,
                              bool concurrent, double* us) {
  *us = 0;
  if (elemBytes < 1) return invalidArgument("model: elemBytes must be at least 1");
  for (const auto& [a, b] : pairs) {
    if (a == b) return invalidArgument("model: rank {} sends to itself", a);
    if (a < 0 || a >= world_ || b < 0 || b >= world_)
      return invalidArgument("model: pair ({}, {}) is outside the job of {} ranks", a, b, world_);
  }
  if (pairs.empty() || bytes == 0) return Status::Ok();
  // The whole job's machine, where ranks without a message have empty plans: the pairs' ranks may sit
  // unevenly on the nodes, which a group's machine cannot describe.
  Group* g = nullptr;
  LOOM_TRY(group({}, concurrent, &g));
  std::map<int, std::vector<P2pOp>> ops;
  const uint64_t count = std::max<uint64_t>(1, bytes / elemBytes);
  for (const auto& [a, b] : pairs) {
    ops[g->index.at(a)].push_back({true, g->index.at(b), count});
    ops[g->index.at(b)].push_back({false, g->index.at(a), count});
  }
  std::vector<Plan> plans(static_cast<size_t>(g->machine.nranks));
  const uint64_t chunk = std::max<uint64_t>(1, slotBytes_ / elemBytes);
  for (int r = 0; r < g->machine.nranks; ++r)
    LOOM_TRY(buildP2pPlan(g->machine.nranks, r, ops[r], chunk, &plans[static_cast<size_t>(r)]).withContext("model: point to point"));
  SimulationResult result;
  LOOM_TRY(simulatePlans(g->machine, plans, elemBytes, &result).withContext("model: point to point"));
  *us = result.timeUs;
  return Status::Ok();
}

Status JobModel::machineOf(std::vector<int> ranks, bool concurrent, MachineModel* out) {
  Group* g = nullptr;
  LOOM_TRY(group(std::move(ranks), concurrent, &g));
  *out = g->machine;
  return Status::Ok();
}

}  // namespace loom::model
