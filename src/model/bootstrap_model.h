// The bootstrap's cost model: how long the part of init that grows with the job takes (the bootstrap
// of src/bootstrap and two setup exchanges, an allGather and a barrier, as perf/bootstrap_scale runs
// them), and what its busiest party (a rank, or the rendezvous) moves and holds, for a job of N ranks
// in hosts of R. It follows the protocol step by step (src/bootstrap/README.md) with constants a host
// measured (`bootstrap-scale --constants`): the CPU of each step, and the network's latency and rate.
//
// Two answers for one job: on a cluster, each host its own cores (the critical path: a host's ranks
// join its leader, the rendezvous takes every record, the table goes down the tree of leaders and the
// exchanges go up and down it); and on one machine that plays every rank on `cores` cores, as the load
// generator does (the work of every party, summed, over the cores), which is how the constants are
// checked against a measurement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom::model {

struct BootstrapConstants {
  // Microseconds of CPU, each measured by `bootstrap-scale --constants` on the host's own code paths.
  double rankStartUs = 60;    // a rank's own start: its listener, its claim of its host's name
  double joinUs = 40;         // a leader takes one of its host's ranks (accept, its record, the answer)
  double connectionUs = 40;   // a short TCP connection: connect, a Hello, close (both ends' CPU)
  double recordUs = 0.3;      // the rendezvous takes one rank's record
  double tableRankUs = 0.05;  // encoding or decoding the table, per rank
  double messageUs = 10;      // a small message between two ranks of a host (a send and its receipt)
  double copyGbs = 5;         // a host's memory copy, GB/s (the table file, the exchanges' parts)
  double threadStartUs = 0;   // one machine playing the ranks: starting a rank's thread (0 on a cluster)
};

struct BootstrapJob {
  int ranks = 1;
  int ranksPerHost = 8;
  double netLatencyUs = 5;  // one message between hosts
  double netGbs = 10;       // TCP between two hosts, GB/s
  size_t gatherBytes = 8;   // the allGather's part per rank (0: no allGather, only the barrier)
  int ranksPerProcess = 1;  // rank threads of one process decode the table once (the load generator: 4096)
};

// What one party moves and holds (bytes both ways, sockets at once), as src/bootstrap/traffic.h counts.
struct BootstrapLoad {
  std::string party;  // "the rendezvous", "the leader of host h", "a rank of host h"
  double bytes = 0;
  int sockets = 0;
};

struct BootstrapPrediction {
  int hosts = 0;
  int depth = 0;            // hops of the tree of leaders, host 0's leader to the farthest
  size_t tableBytes = 0;    // the encoded table
  // On a cluster, microseconds: until every rank has the table; then the allGather; then the barrier.
  double tableUs = 0;
  double gatherUs = 0;
  double barrierUs = 0;
  double clusterUs = 0;     // their sum
  // The busiest parties, by bytes and by sockets.
  BootstrapLoad busiestBytes;
  BootstrapLoad busiestSockets;
  // Every party's CPU summed, microseconds (one machine playing the job divides it by its cores).
  double totalCpuUs = 0;
};

// The constants by name ("join_us=40,record_us=0.3"; commas or spaces between entries), over those
// already in *out; fails naming an unknown name or a value that is not a non-negative number. And back:
// every constant by name, as `bootstrap-scale --constants` prints what it measured.
Status parseBootstrapConstants(const std::string& text, BootstrapConstants* out);
std::string formatBootstrapConstants(const BootstrapConstants& c);

BootstrapPrediction predictBootstrap(const BootstrapJob& job, const BootstrapConstants& constants);

}  // namespace loom::model
