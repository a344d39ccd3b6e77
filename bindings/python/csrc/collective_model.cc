// loom._C.CollectiveModel: Loom's own prediction of a collective's time for a group of ranks placed in a
// job, for the planner (loom.plan). A group is timed as a communicator of exactly those ranks would
// time it: its job topology from the same three steps a communicator's init runs (each member placed on
// the GPU its job rank stands for, via the LOOM_TOPO_GPU path of placeRank), the machine model from
// jobMachine, and the tuner's choice and prediction (the simulated plans), as loom-sim does.
//
// This file reaches the library's internals, which libloom.so keeps hidden: the extension links the
// objects it needs from libloom_internal.a (setup.py), after libloom.so so that every public loom*
// symbol still comes from the shared library. Only Status' plain members are used here: the library's
// headers see torch's fmt, which differs from the one the library was built with.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/machine_model.h"
#include "algorithms/plan_simulator.h"
#include "algorithms/tuner.h"
#include "topology/calibration.h"
#include "topology/job_topology.h"
#include "topology/topology_file.h"

namespace py = pybind11;

namespace loomtorch {
namespace {

void check(const loom::Status& st, const std::string& what) {
  if (!st.ok()) throw std::runtime_error(what + ": " + st.message());
}

loom::Collective parseOp(const std::string& name) {
  static const std::map<std::string, loom::Collective> names = {
      {"all_reduce", loom::Collective::AllReduce},         {"all_gather", loom::Collective::AllGather},
      {"reduce_scatter", loom::Collective::ReduceScatter}, {"broadcast", loom::Collective::Broadcast},
      {"reduce", loom::Collective::Reduce},                {"all_to_all", loom::Collective::AlltoAll},
  };
  auto it = names.find(name);
  if (it == names.end())
    throw py::value_error("CollectiveModel: unknown collective '" + name +
                          "' (all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all)");
  return it->second;
}

// The machine model's fields a caller may set, as loom-sim's flags do, after the topology's.
struct Overrides {
  std::map<std::string, double> values;

  void apply(loom::MachineModel* m) const {
    for (const auto& [key, v] : values) {
      if (key == "intra_gbs") m->intraGbs = v;
      else if (key == "nics_per_node") m->nicsPerNode = static_cast<int>(v);
      else if (key == "nic_gbs") m->nicGbs = v;
      else if (key == "latency_us") m->intraLatencyUs = v;
      else if (key == "net_latency_us") m->netLatencyUs = v;
      else if (key == "step_us") m->stepUs = v;
      else if (key == "copy_gbs") m->copyGbs = v;
      else if (key == "fifo_slots") m->fifoSlots = static_cast<int>(v);
    }
  }
};

const char* const kOverrideKeys[] = {"intra_gbs", "nics_per_node", "nic_gbs",   "latency_us",
                                     "net_latency_us", "step_us", "copy_gbs", "fifo_slots"};

class CollectiveModel {
 public:
  // world ranks in nodes of ranksPerNode (0: one node, or the topology's GPU count when it divides
  // world). topology: "" for LOOM_TOPO_FILE or the live machine, "none" for no topology (the flags'
  // machine, loom-sim without --topo), else a topology file. memory: "auto" (device, unless the topology
  // has no GPUs), "host" or "device".
  CollectiveModel(int world, int ranksPerNode, const std::string& topology, const std::string& memory,
                  const std::map<std::string, double>& overrides, int maxChannels, uint64_t slotBytes)
      : world_(world), slotBytes_(slotBytes) {
    if (world < 1) throw py::value_error("CollectiveModel: world must be positive");
    for (const auto& [key, value] : overrides) {
      if (std::find(std::begin(kOverrideKeys), std::end(kOverrideKeys), key) == std::end(kOverrideKeys))
        throw py::value_error("CollectiveModel: unknown machine field '" + key + "'");
      if (!(value > 0) && key != "latency_us" && key != "net_latency_us" && key != "step_us" && key != "copy_gbs")
        throw py::value_error("CollectiveModel: " + key + " must be positive");
    }
    overrides_.values = overrides;
    if (topology != "none") {
      graph_ = std::make_unique<loom::SystemGraph>();
      check(topology.empty() ? loom::loadSystemTopology(graph_.get()) : loom::loadTopologyFile(topology, graph_.get()),
            "CollectiveModel: topology");
      if (ranksPerNode <= 0 && graph_->gpuCount() > 0 && world % graph_->gpuCount() == 0)
        ranksPerNode = graph_->gpuCount();
    }
    ranksPerNode_ = ranksPerNode <= 0 || ranksPerNode > world ? world : ranksPerNode;
    if (world % ranksPerNode_)
      throw py::value_error("CollectiveModel: ranks_per_node does not divide the world");
    if (memory == "auto") device_ = !graph_ || graph_->gpuCount() > 0;
    else if (memory == "host" || memory == "device") device_ = memory == "device";
    else throw py::value_error("CollectiveModel: memory must be auto, host or device");
    if (graph_ && device_ && graph_->gpuCount() == 0)
      throw py::value_error("CollectiveModel: device memory on a topology without GPUs");
    maxChannels_ = maxChannels > 0 ? maxChannels : (device_ ? 16 : 2);
    if (!device_ && graph_) {
      loom::Calibration calibration;
      auto it = overrides.find("copy_gbs");
      if (it != overrides.end()) calibration.copyGbs = it->second;
      else check(loom::processCalibration(&calibration), "CollectiveModel: host-memory calibration");
      copyGbs_ = calibration.copyGbs;
    }
  }

  // Predicted microseconds of `op` moving `bytes` (nccl-tests' size: the whole buffer, every rank's
  // block for all_gather, reduce_scatter and all_to_all) over the group `ranks` (job ranks); with
  // concurrent, every group of its shape in the job runs at the same time and they share the NICs.
  py::dict collective(const std::string& opName, uint64_t bytes, std::vector<int> ranks, int elemBytes,
                      bool concurrent) {
    const loom::Collective op = parseOp(opName);
    if (elemBytes < 1) throw py::value_error("CollectiveModel: elem_bytes must be positive");
    Group& g = group(std::move(ranks), concurrent);
    py::dict out;
    out["algorithm"] = "none";
    out["channels"] = 0;
    out["time_us"] = 0.0;
    const int n = g.machine.nranks;
    const bool blocks = op == loom::Collective::AllGather || op == loom::Collective::ReduceScatter ||
                        op == loom::Collective::AlltoAll;
    const uint64_t count = bytes / static_cast<uint64_t>(elemBytes) / (blocks ? static_cast<uint64_t>(n) : 1);
    if (n == 1 || count == 0) return out;
    loom::TuneRequest req;
    req.coll = op;
    req.count = count;
    req.elemSize = static_cast<size_t>(elemBytes);
    req.slotBytes = slotBytes_;
    req.maxChannels = maxChannels_;
    loom::TuneChoice choice;
    double us = 0;
    {
      py::gil_scoped_release release;
      check(g.tuner->choosePlan(req, &choice), "CollectiveModel: " + opName);
      check(g.tuner->predict(req, choice, &us), "CollectiveModel: " + opName);
    }
    out["algorithm"] = loom::algorithmName(choice.algorithm);
    out["channels"] = choice.nchannels;
    out["time_us"] = us;
    return out;
  }

  // Predicted microseconds until every pair's message (src sends `bytes` to dst, all at once) arrived,
  // on the job's machine (concurrent: as other groups of the job's shape are).
  double p2p(uint64_t bytes, const std::vector<std::pair<int, int>>& pairs, int elemBytes, bool concurrent) {
    if (pairs.empty() || bytes == 0) return 0;
    for (const auto& [a, b] : pairs)
      if (a == b) throw py::value_error("CollectiveModel.p2p: a rank sends to itself");
    // The whole job's machine, where ranks without a message have empty plans: the pairs' ranks may sit
    // unevenly on the nodes, which a group's machine cannot describe.
    std::vector<int> ranks(static_cast<size_t>(world_));
    for (int r = 0; r < world_; ++r) ranks[static_cast<size_t>(r)] = r;
    Group& g = group(ranks, concurrent);
    std::map<int, std::vector<loom::P2pOp>> ops;
    const uint64_t count = std::max<uint64_t>(1, bytes / static_cast<uint64_t>(elemBytes));
    for (const auto& [a, b] : pairs) {
      ops[g.index.at(a)].push_back({true, g.index.at(b), count});
      ops[g.index.at(b)].push_back({false, g.index.at(a), count});
    }
    std::vector<loom::Plan> plans(static_cast<size_t>(g.machine.nranks));
    const uint64_t chunk = std::max<uint64_t>(1, slotBytes_ / static_cast<uint64_t>(elemBytes));
    for (int r = 0; r < g.machine.nranks; ++r)
      check(loom::buildP2pPlan(g.machine.nranks, r, ops[r], chunk, &plans[static_cast<size_t>(r)]),
            "CollectiveModel.p2p");
    loom::SimulationResult result;
    {
      py::gil_scoped_release release;
      check(loom::simulatePlans(g.machine, plans, static_cast<size_t>(elemBytes), &result), "CollectiveModel.p2p");
    }
    return result.timeUs;
  }

  // The machine model a group is timed on (loom-sim's header line, as a dict).
  py::dict machine(std::vector<int> ranks, bool concurrent) {
    const loom::MachineModel& m = group(std::move(ranks), concurrent).machine;
    py::dict d;
    d["nranks"] = m.nranks;
    d["ranks_per_node"] = m.ranksInNode();
    d["intra_gbs"] = m.intraGbs;
    d["latency_us"] = m.intraLatencyUs;
    d["nics_per_node"] = m.nicsPerNode;
    d["nic_gbs"] = m.nicGbs;
    d["net_latency_us"] = m.netLatencyUs;
    d["step_us"] = m.stepUs;
    d["copy_gbs"] = m.copyGbs;
    d["memory"] = device_ ? "device" : "host";
    d["max_channels"] = maxChannels_;
    return d;
  }

  int world() const { return world_; }
  int ranksPerNode() const { return ranksPerNode_; }
  std::string source() const { return graph_ ? graph_->source : "none"; }

 private:
  struct Group {
    loom::MachineModel machine;
    std::unique_ptr<loom::Tuner> tuner;
    std::map<int, int> index;  // job rank -> rank in the group
  };

  // The group's members per node, as local indices: what its timing depends on.
  Group& group(std::vector<int> ranks, bool concurrent) {
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    if (ranks.empty()) throw py::value_error("CollectiveModel: an empty group");
    std::map<int, std::vector<int>> perNode;  // node -> local indices
    for (int r : ranks) {
      if (r < 0 || r >= world_)
        throw py::value_error("CollectiveModel: rank " + std::to_string(r) + " is outside the world of " +
                              std::to_string(world_));
      perNode[r / ranksPerNode_].push_back(r % ranksPerNode_);
    }
    const size_t m = perNode.begin()->second.size();
    for (const auto& [node, locals] : perNode)
      if (locals.size() != m)
        throw py::value_error("CollectiveModel: the group has different numbers of ranks on its nodes");
    // Nodes are alike, so which nodes does not matter: the members' local indices on each does.
    std::string key = concurrent ? "c" : "";
    for (const auto& [node, locals] : perNode) {
      key += "|";
      for (int local : locals) key += std::to_string(local) + ",";
    }
    auto it = groups_.find(key);
    if (it == groups_.end()) it = groups_.emplace(key, build(perNode, concurrent)).first;
    Group& g = *it->second;
    g.index.clear();
    for (size_t i = 0; i < ranks.size(); ++i) g.index[ranks[i]] = static_cast<int>(i);
    return g;
  }

  std::unique_ptr<Group> build(const std::map<int, std::vector<int>>& perNode, bool concurrent) {
    const int nodes = static_cast<int>(perNode.size());
    const int m = static_cast<int>(perNode.begin()->second.size());
    const int n = nodes * m;
    auto g = std::make_unique<Group>();
    std::vector<std::vector<int>> rings;
    if (graph_) {
      std::vector<loom::RankPlacement> placements(static_cast<size_t>(n));
      int r = 0;
      for (const auto& [node, locals] : perNode) {
        for (int i = 0; i < m; ++i, ++r) {
          loom::PlacementInputs in;
          in.localIndex = i;
          if (graph_->gpuCount() > 0)
            for (int local : locals) in.gpuOverride.push_back(local % graph_->gpuCount());
          check(loom::placeRank(*graph_, in, &placements[static_cast<size_t>(r)]), "CollectiveModel: placement");
          placements[static_cast<size_t>(r)].hostHash = static_cast<uint64_t>(node) + 1;
          placements[static_cast<size_t>(r)].copyGbs = static_cast<float>(copyGbs_);
        }
      }
      std::vector<loom::HostChannelRecord> records(static_cast<size_t>(n));
      for (int first = 0; first < n; first += m) {
        std::vector<int> hostRanks;
        for (int q = first; q < first + m; ++q) hostRanks.push_back(q);
        std::vector<loom::HostChannelRecord> hostRecords;
        check(loom::planHost(*graph_, hostRanks, placements, &hostRecords), "CollectiveModel: host plan");
        for (int i = 0; i < m; ++i) records[static_cast<size_t>(first + i)] = hostRecords[static_cast<size_t>(i)];
      }
      loom::JobTopology job;
      check(loom::assembleJob(placements, records, &job), "CollectiveModel: job topology");
      g->machine = loom::jobMachine(job, device_ ? loom::MemorySide::Device : loom::MemorySide::Host);
      rings = job.rings;
    } else {
      g->machine = device_ ? loom::defaultMachine(n, nodes > 1 ? m : 0) : loom::hostMemoryMachine(n, nodes > 1 ? m : 0);
      if (device_) g->machine.intraLatencyUs = g->machine.netLatencyUs = 2.0;  // loom-sim's default
    }
    overrides_.apply(&g->machine);
    if (overrides_.values.count("latency_us") && !overrides_.values.count("net_latency_us"))
      g->machine.netLatencyUs = overrides_.values.at("latency_us");
    if (concurrent && nodes > 1) {
      // ranksPerNode_ / m groups of this shape share each node's NICs; the model gives this one
      // min(m, NICs) of them at full rate.
      const double nics = g->machine.nicsPerNode;
      const double share = nics * m / ranksPerNode_ / std::min<double>(m, nics);
      if (share < 1) g->machine.nicGbs *= share;
    }
    check(g->machine.validate(), "CollectiveModel: machine");
    g->tuner = std::make_unique<loom::Tuner>(g->machine, rings);
    return g;
  }

  int world_;
  int ranksPerNode_ = 0;
  bool device_ = false;
  int maxChannels_ = 2;
  uint64_t slotBytes_;
  double copyGbs_ = 0;
  Overrides overrides_;
  std::unique_ptr<loom::SystemGraph> graph_;
  std::map<std::string, std::unique_ptr<Group>> groups_;
};

}  // namespace

void registerCollectiveModel(py::module_& m) {
  py::class_<CollectiveModel>(m, "CollectiveModel",
                              "Loom's cost model (the tuner's choice and simulated plans) for groups of a job's ranks")
      .def(py::init<int, int, const std::string&, const std::string&, const std::map<std::string, double>&, int,
                    uint64_t>(),
           py::arg("world"), py::arg("ranks_per_node") = 0, py::arg("topology") = "", py::arg("memory") = "auto",
           py::arg("machine") = std::map<std::string, double>{}, py::arg("max_channels") = 0,
           py::arg("slot_bytes") = 256u << 10)
      .def("collective", &CollectiveModel::collective, py::arg("op"), py::arg("bytes"), py::arg("ranks"),
           py::arg("elem_bytes") = 4, py::arg("concurrent") = true,
           "{time_us, algorithm, channels} of op on `bytes` (the whole buffer) over the job ranks `ranks`")
      .def("p2p", &CollectiveModel::p2p, py::arg("bytes"), py::arg("pairs"), py::arg("elem_bytes") = 4,
           py::arg("concurrent") = true, "microseconds until every (src, dst) pair's message of `bytes` arrived")
      .def("machine", &CollectiveModel::machine, py::arg("ranks"), py::arg("concurrent") = true,
           "the machine model a group is timed on")
      .def_property_readonly("world", &CollectiveModel::world)
      .def_property_readonly("ranks_per_node", &CollectiveModel::ranksPerNode)
      .def_property_readonly("source", &CollectiveModel::source);
}

}  // namespace loomtorch
