// loom-sim: predicts what Loom would do and how long it would take on a modelled machine of any size,
// by tuning and simulating the very plans the library runs, through the model's public API
// (include/loom_model.h).
//   loom-sim <coll> --ranks N [--ranks-per-node K] [--topo FILE [--nvswitch-gbs G] [--memory device|host]
//            [--calibration F]] [--intra-gbs X] [--nics-per-node M --nic-gbs Y] [--latency-us L]
//            [--launch-us U] [--algo A|RULES] -b MIN -e MAX -f F [--json]
//   loom-sim init [--ranks N,N,...] [--ranks-per-node K] [--net-latency-us L] [--net-gbs G]
//            [--gather-bytes B] [--constants C] [--cores C] [--json]   (init.h: the bootstrap's model)
// With --topo, the machine and the rings are what a communicator of N ranks on hosts described by FILE
// builds, then the flags given override it.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "init.h"
#include "loom_model.h"
#include "sweep.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "loom-sim: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "init") return loom::sim_tool::runInitCommand(argc - 1, argv + 1);
  using loom::sim_tool::SweepOptions;
  CLI::App app{"Predict Loom's choice (algorithm, channels) and time for a collective on a modelled machine, "
               "per size, with nccl-tests' algbw and busbw. Every number comes from simulating the plans of all "
               "ranks (or, where plans and machine are symmetric, of one node's)."};
  std::string collName, topoFile, calibrationFile;
  std::string memory = "device";
  int ranks = 0, ranksPerNode = 0, maxChannels = 16;
  double factor = 2, nvswitchGbs = 0;
  bool json = false;
  SweepOptions options;
  // Machine fields by their model names (src/model/machine_fields.cc); only those given are passed.
  struct Flag {
    const char* flag;
    const char* field;
    double value;
    const char* help;
  };
  Flag fields[] = {
      {"--intra-gbs", "intra_gbs", 0, "GB/s per rank and direction inside a node (default 20, or from --topo)"},
      {"--nics-per-node", "nics_per_node", 0, "NICs per node; local rank j uses NIC j*M/K (default 1, or from --topo)"},
      {"--nic-gbs", "nic_gbs", 0, "GB/s per NIC and direction (default 12.5, or from --topo)"},
      {"--latency-us", "latency_us", 0,
       "latency of one message inside a node, and between nodes unless --net-latency-us is given (default 2)"},
      {"--net-latency-us", "net_latency_us", 0, "latency of one message between nodes"},
      {"--step-us", "step_us", 0, "executor time per plan step; a rank runs its steps one at a time (device memory: each lane its own, side by side) (default 0.2)"},
      {"--launch-us", "launch_us", 0, "time per operation before its first step: a kernel launch (device memory)"},
      {"--copy-gbs", "copy_gbs", 0, "a rank's copy/reduce rate for the bytes of each step (device memory with --topo: a lane's, 30); 0: free (default)"},
      {"--fifo-slots", "fifo_slots", 0, "messages in flight per connection (default: a communicator's, 4; on device memory on one node 8)"},
      {"--peer-memory", "peer_memory", 0,
       "1: the ranks address each other's buffers (plan kernels of rank threads on one GPU), so that peer-memory "
       "plans (peer, peer-oneshot) are candidates (default 0)"},
  };
  app.add_option("coll", collName, "all_reduce, broadcast, reduce, all_gather, reduce_scatter, alltoall, gather, scatter")
      ->required();
  app.add_option("--ranks,-n", ranks, "number of ranks")->required()->check(CLI::Range(1, 1 << 22));
  app.add_option("--ranks-per-node", ranksPerNode,
                 "ranks per node, grouped contiguously (default: all on one node, or the topology's GPU count)")
      ->check(CLI::Range(1, 1 << 22));
  app.add_option("--topo", topoFile,
                 "hwloc or NCCL topology XML of one node: the model and rings a communicator on such nodes "
                 "builds (ranks per node: its GPUs), then the flags given override it");
  app.add_option("--nvswitch-gbs", nvswitchGbs,
                 "with --topo: join the file's GPUs by an NVSwitch at this GB/s per GPU, for files that leave "
                 "NVLink out (NCCL reads it from NVML at run time; an A100's 12 NVLinks: 240)")
      ->check(CLI::PositiveNumber);
  app.add_option("--memory", memory, "with --topo: model device memory over the GPU fabric (default) or host "
                                     "memory as a communicator's host operations run")
      ->check(CLI::IsMember({"device", "host"}));
  app.add_option("--calibration", calibrationFile, "with --topo --memory host: the host-memory rate, as "
                                                   "LOOM_CALIBRATION_FILE (default: --copy-gbs, else measured)");
  for (Flag& f : fields) app.add_option(f.flag, f.value, f.help)->check(CLI::NonNegativeNumber);
  uint64_t slotBytes = 0;
  app.add_option("--slot-bytes", slotBytes, "largest message (the transports' slot), K/M/G suffixes (default: a "
                                            "communicator's: 128K, or on device memory its plan kernels' FIFO "
                                            "slot, 512K on one node)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::PositiveNumber);
  app.add_option("--max-channels", maxChannels, "channels the communicator has (default 16)")->check(CLI::Range(1, 256));
  app.add_option("--algo", options.algorithm,
                 "force an algorithm (ring, tree, direct, hier, oneshot, peer, peer-oneshot), or one per collective and size range as "
                 "LOOM_ALGO takes them: allreduce:0-64K:oneshot,64K-:ring (ranges in nccl-tests' size, as -b/-e)");
  app.add_option("--chunk-bytes", options.chunkBytes, "force the chunk size (LOOM_CHUNK_BYTES)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--channels", options.channels, "force the channel count (LOOM_NCHANNELS)")->check(CLI::Range(1, 256));
  app.add_option("--elem-bytes", options.elemSize, "bytes per element (default 4, float)")->check(CLI::Range(1, 64));
  app.add_option("-b,--minbytes", options.minBytes, "smallest size, K/M/G suffixes (default 8)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-e,--maxbytes", options.maxBytes, "largest size (default: the smallest)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-f,--stepfactor", factor, "multiply the size by this between rows (default 2)")->check(CLI::Range(1.001, 1e6));
  app.add_option("-i,--stepbytes", options.stepBytes, "add this many bytes between rows instead of -f")
      ->transform(CLI::AsSizeValue(false));
  app.add_flag("--json", json, "print a JSON list of {bytes, algorithm, channels, chunk_bytes, time_us, algbw_gbs, busbw_gbs}");
  CLI11_PARSE(app, argc, argv);

  if (!loom::sim_tool::parseCollective(collName, &options.coll)) return fail("unknown collective '" + collName + "'");
  if (!app.count("--maxbytes")) options.maxBytes = options.minBytes;
  if (app.count("--nvswitch-gbs") && topoFile.empty()) return fail("--nvswitch-gbs needs --topo");
  options.factor = factor;

  std::string machineFields;
  for (const Flag& f : fields)
    if (app.count(f.flag)) machineFields += fmt::format("{}{}={}", machineFields.empty() ? "" : ",", f.field, f.value);
  loomModelConfig_t config = LOOM_MODEL_CONFIG_INITIALIZER;
  config.world = ranks;
  config.ranksPerNode = ranksPerNode;
  // Without --topo the machine is the flags' alone (device memory), whatever LOOM_TOPO_FILE says.
  config.topology = topoFile.empty() ? "none" : topoFile.c_str();
  config.memory = memory == "host" ? loomModelMemoryHost : loomModelMemoryDevice;
  config.nvswitchGbs = nvswitchGbs;
  config.machine = machineFields.c_str();
  config.maxChannels = maxChannels;
  config.slotBytes = slotBytes;
  config.calibration = calibrationFile.empty() ? nullptr : calibrationFile.c_str();
  loomModel_t model = nullptr;
  if (loomModelCreate(&config, &model) != loomSuccess) return fail(loomGetLastError(nullptr));
  loomModelMachine_t machine;
  std::vector<loomModelPrediction_t> rows;
  std::string error;
  const bool ok = loomModelGetMachine(model, nullptr, 0, 1, &machine) == loomSuccess &&
                  loom::sim_tool::runSweep(model, options, &rows, &error);
  if (!ok && error.empty()) error = loomGetLastError(nullptr);
  loomModelDestroy(model);
  if (!ok) return fail(error);
  if (json) {
    std::cout << loom::sim_tool::renderJson(rows).dump(2) << "\n";
  } else {
    std::cout << loom::sim_tool::renderTable(machine, collName, rows);
  }
  return 0;
}
