#include "init.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <vector>

#include "loom_model.h"

namespace loom::sim_tool {

int runInitCommand(int argc, char** argv) {
  CLI::App app{"Predict the part of init that grows with the job (the bootstrap and two setup exchanges, as "
               "perf/bootstrap_scale runs them) from the protocol and constants a host measured "
               "(bootstrap-scale --constants): on a cluster, and on one machine playing every rank."};
  app.name("loom-sim init");
  std::vector<int> ranks{1024, 4096, 16384, 65536, 131072};
  int ranksPerNode = 8, ranksPerProcess = 1, cores = 0;
  double netLatencyUs = 5, netGbs = 10;
  size_t gatherBytes = 8;
  std::string constants;
  bool json = false;
  app.add_option("--ranks,-n", ranks, "job sizes, comma-separated")->delimiter(',')->check(CLI::Range(1, 1 << 24));
  app.add_option("--ranks-per-node", ranksPerNode, "ranks per host (default 8)")->check(CLI::Range(1, 1 << 24));
  app.add_option("--net-latency-us", netLatencyUs, "one message between hosts (default 5)")->check(CLI::NonNegativeNumber);
  app.add_option("--net-gbs", netGbs, "TCP between two hosts, GB/s (default 10)")->check(CLI::PositiveNumber);
  app.add_option("--gather-bytes", gatherBytes, "the allGather's part per rank; 0: the barrier only (default 8)");
  app.add_option("--constants", constants, "the host's constants, as bootstrap-scale --constants prints them "
                                           "(default: the model's, measured on a 2-core VM)");
  app.add_option("--ranks-per-process", ranksPerProcess, "rank threads per process (default 1)")->check(CLI::Range(1, 1 << 24));
  app.add_option("--cores", cores, "also print one machine of this many cores playing the job (the load generator)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_flag("--json", json, "print a JSON list, one object per job size");
  CLI11_PARSE(app, argc, argv);

  nlohmann::json rows = nlohmann::json::array();
  std::string table = fmt::format("{:>8} {:>6} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10}  {:<34} {:>7}  {}\n", "ranks",
                                  "hosts", "depth", "table B", "table ms", "gather ms", "barrier ms", "total ms",
                                  "busiest bytes (party)", "sockets", cores ? fmt::format("1 machine, {} cores", cores) : "");
  for (int n : ranks) {
    loomModelInitRequest_t request = LOOM_MODEL_INIT_REQUEST_INITIALIZER;
    request.ranks = n;
    request.ranksPerNode = ranksPerNode;
    request.netLatencyUs = netLatencyUs;
    request.netGbs = netGbs;
    request.gatherBytes = gatherBytes;
    request.ranksPerProcess = ranksPerProcess;
    request.constants = constants.c_str();
    loomModelInitPrediction_t p;
    if (loomModelPredictInit(&request, &p) != loomSuccess) {
      std::fprintf(stderr, "loom-sim init: %s\n", loomGetLastError(nullptr));
      return 1;
    }
    nlohmann::json row = {{"ranks", n},
                          {"hosts", p.hosts},
                          {"depth", p.depth},
                          {"table_bytes", p.tableBytes},
                          {"table_us", p.tableUs},
                          {"gather_us", p.gatherUs},
                          {"barrier_us", p.barrierUs},
                          {"total_us", p.totalUs},
                          {"busiest_bytes", p.busiestBytes},
                          {"busiest_bytes_party", p.busiestBytesParty},
                          {"busiest_sockets", p.busiestSockets},
                          {"busiest_sockets_party", p.busiestSocketsParty},
                          {"cpu_us", p.cpuUs}};
    if (cores) row["one_machine_us"] = p.cpuUs / cores;
    rows.push_back(row);
    table += fmt::format("{:>8} {:>6} {:>5} {:>10} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}  {:<34} {:>7}  {}\n", n,
                         p.hosts, p.depth, p.tableBytes, p.tableUs / 1e3, p.gatherUs / 1e3, p.barrierUs / 1e3,
                         p.totalUs / 1e3,
                         fmt::format("{:.3g} MB ({})", p.busiestBytes / 1e6, p.busiestBytesParty), p.busiestSockets,
                         cores ? fmt::format("{:.2f} s", p.cpuUs / cores / 1e6) : "");
  }
  if (json)
    std::cout << rows.dump(2) << "\n";
  else
    std::cout << table;
  return 0;
}

}  // namespace loom::sim_tool
