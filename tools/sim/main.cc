// loom-sim: predicts what Loom would do and how long it would take on a modelled machine of any size,
// by tuning and simulating the very plans the library runs.
//   loom-sim <coll> --ranks N [--ranks-per-node K] [--topo FILE [--memory device|host] [--calibration F]]
//            [--intra-gbs X] [--nics-per-node M --nic-gbs Y] [--latency-us L] [--algo A] -b MIN -e MAX -f F [--json]
// With --topo, the machine and the rings are what a communicator of N ranks on hosts described by FILE
// builds (topology/job_topology.h's modelJob, algorithms/machine_model.h's jobMachine: the same
// functions), then the flags given override it.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "algorithms/machine_model.h"
#include "sweep.h"
#include "topology/calibration.h"
#include "topology/job_topology.h"
#include "topology/topology.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "loom-sim: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using loom::sim_tool::SweepOptions;
  CLI::App app{"Predict Loom's choice (algorithm, channels) and time for a collective on a modelled machine, "
               "per size, with nccl-tests' algbw and busbw. Every number comes from simulating the plans of all "
               "ranks (or, where plans and machine are symmetric, of one node's)."};
  std::string collName, minText = "8", maxText = "8", stepText, algoName, topoFile, chunkText;
  int ranks = 0, ranksPerNode = 0, nicsPerNode = 1, fifoSlots = 4, maxChannels = 16, channels = 0, elemSize = 4;
  double intraGbs = 0, nicGbs = 12.5, latencyUs = 2.0, netLatencyUs = -1, stepUs = 0.2, copyGbs = 0, factor = 2;
  std::string slotText = "256K";
  bool json = false;
  app.add_option("coll", collName, "all_reduce, broadcast, reduce, all_gather, reduce_scatter, alltoall, gather, scatter")
      ->required();
  app.add_option("--ranks,-n", ranks, "number of ranks")->required()->check(CLI::Range(1, 1 << 22));
  app.add_option("--ranks-per-node", ranksPerNode,
                 "ranks per node, grouped contiguously (default: all on one node, or the topology's GPU count)")
      ->check(CLI::Range(1, 1 << 22));
  app.add_option("--topo", topoFile,
                 "hwloc or NCCL topology XML of one node: the model and rings a communicator on such nodes "
                 "builds (ranks per node: its GPUs), then the flags given override it");
  std::string memory = "device", calibrationFile;
  app.add_option("--memory", memory, "with --topo: model device memory over the GPU fabric (default) or host "
                                     "memory as a communicator's host operations run")
      ->check(CLI::IsMember({"device", "host"}));
  app.add_option("--calibration", calibrationFile, "with --topo --memory host: the host-memory rate, as "
                                                   "LOOM_CALIBRATION_FILE (default: --copy-gbs, else measured)");
  app.add_option("--intra-gbs", intraGbs, "GB/s per rank and direction inside a node (default 20, or from --topo)")
      ->check(CLI::PositiveNumber);
  app.add_option("--nics-per-node", nicsPerNode, "NICs per node; local rank j uses NIC j*M/K (default 1)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--nic-gbs", nicGbs, "GB/s per NIC and direction (default 12.5)")->check(CLI::PositiveNumber);
  app.add_option("--latency-us", latencyUs, "latency of one message inside a node, and between nodes unless "
                                            "--net-latency-us is given (default 2)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--net-latency-us", netLatencyUs, "latency of one message between nodes")->check(CLI::NonNegativeNumber);
  app.add_option("--step-us", stepUs, "executor time per plan step; a rank runs its steps one at a time (default 0.2)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--copy-gbs", copyGbs, "a rank's copy/reduce rate for the bytes of each step; 0: free (default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fifo-slots", fifoSlots, "messages in flight per connection (default 4)")->check(CLI::Range(1, 1024));
  app.add_option("--slot-bytes", slotText, "largest message (the transports' slot), K/M/G suffixes (default 256K)");
  app.add_option("--max-channels", maxChannels, "channels the communicator has (default 16)")->check(CLI::Range(1, 256));
  app.add_option("--algo", algoName, "force an algorithm: ring, tree, direct, hier, oneshot (LOOM_ALGO)");
  app.add_option("--chunk-bytes", chunkText, "force the chunk size (LOOM_CHUNK_BYTES)");
  app.add_option("--channels", channels, "force the channel count (LOOM_NCHANNELS)")->check(CLI::Range(1, 256));
  app.add_option("--elem-bytes", elemSize, "bytes per element (default 4, float)")->check(CLI::Range(1, 64));
  app.add_option("-b,--minbytes", minText, "smallest size, K/M/G suffixes (default 8)");
  app.add_option("-e,--maxbytes", maxText, "largest size (default: the smallest)");
  app.add_option("-f,--stepfactor", factor, "multiply the size by this between rows (default 2)")->check(CLI::Range(1.001, 1e6));
  app.add_option("-i,--stepbytes", stepText, "add this many bytes between rows instead of -f");
  app.add_flag("--json", json, "print a JSON list of {bytes, algorithm, channels, chunk_bytes, time_us, algbw_gbs, busbw_gbs}");
  CLI11_PARSE(app, argc, argv);

  SweepOptions options;
  if (!loom::sim_tool::parseCollective(collName, &options.coll) || options.coll == loom::Collective::SendRecv)
    return fail("unknown collective '" + collName + "'");
  if (!loom::sim_tool::parseBytes(minText, &options.minBytes)) return fail("bad -b size '" + minText + "'");
  if (!app.count("--maxbytes")) maxText = minText;
  if (!loom::sim_tool::parseBytes(maxText, &options.maxBytes)) return fail("bad -e size '" + maxText + "'");
  if (!stepText.empty() && !loom::sim_tool::parseBytes(stepText, &options.stepBytes))
    return fail("bad -i size '" + stepText + "'");
  if (!loom::sim_tool::parseBytes(slotText, &options.slotBytes) || options.slotBytes == 0)
    return fail("bad --slot-bytes '" + slotText + "'");
  if (!chunkText.empty() && !loom::sim_tool::parseBytes(chunkText, &options.chunkBytes))
    return fail("bad --chunk-bytes '" + chunkText + "'");
  if (!algoName.empty()) {
    loom::Algorithm algo;
    if (!loom::parseAlgorithmName(algoName, &algo)) return fail("unknown algorithm '" + algoName + "'");
    options.algorithm = algo;
  }
  options.factor = factor;
  options.elemSize = static_cast<size_t>(elemSize);
  options.maxChannels = maxChannels;
  options.channels = channels;

  loom::MachineModel machine = loom::defaultMachine(ranks, ranksPerNode);
  machine.nicsPerNode = nicsPerNode;
  machine.nicGbs = nicGbs;
  machine.intraLatencyUs = latencyUs;
  machine.netLatencyUs = netLatencyUs >= 0 ? netLatencyUs : latencyUs;
  machine.stepUs = stepUs;
  machine.copyGbs = copyGbs;
  machine.fifoSlots = fifoSlots;
  if (!topoFile.empty()) {
    loom::SystemGraph graph;
    loom::Status st = loom::loadTopologyFile(topoFile, &graph);
    if (!st.ok()) return fail(st.message());
    if (!app.count("--ranks-per-node") && graph.gpuCount() > 0 && ranks % graph.gpuCount() == 0)
      ranksPerNode = graph.gpuCount();
    loom::Calibration calibration;
    calibration.copyGbs = copyGbs;
    if (memory == "host" && !app.count("--copy-gbs")) {
      st = calibrationFile.empty() ? loom::processCalibration(&calibration)
                                   : loom::readCalibrationFile(calibrationFile, &calibration);
      if (!st.ok()) return fail(st.message());
    }
    loom::JobTopology job;
    st = loom::modelJob(graph, ranks, ranksPerNode, calibration.copyGbs, &job);
    if (!st.ok()) return fail(st.message());
    const loom::MachineModel fromTopology =
        loom::jobMachine(job, memory == "host" ? loom::MemorySide::Host : loom::MemorySide::Device);
    // Only what the flags give overrides the topology's model.
    const loom::MachineModel flags = machine;
    machine = fromTopology;
    if (app.count("--nics-per-node")) machine.nicsPerNode = flags.nicsPerNode;
    if (app.count("--nic-gbs")) machine.nicGbs = flags.nicGbs;
    if (app.count("--latency-us")) machine.intraLatencyUs = flags.intraLatencyUs;
    if (app.count("--latency-us") || app.count("--net-latency-us")) machine.netLatencyUs = flags.netLatencyUs;
    if (app.count("--step-us")) machine.stepUs = flags.stepUs;
    if (app.count("--copy-gbs")) machine.copyGbs = flags.copyGbs;
    if (app.count("--fifo-slots")) machine.fifoSlots = flags.fifoSlots;
    options.rings = job.rings;
  }
  if (app.count("--intra-gbs")) machine.intraGbs = intraGbs;
  if (const loom::Status st = machine.validate(); !st.ok()) return fail(st.message());

  std::vector<loom::sim_tool::SweepRow> rows;
  if (const loom::Status st = loom::sim_tool::runSweep(machine, options, &rows); !st.ok()) return fail(st.message());
  if (json) {
    std::cout << loom::sim_tool::renderJson(rows).dump(2) << "\n";
  } else {
    std::cout << loom::sim_tool::renderTable(machine, options, rows);
  }
  return 0;
}
