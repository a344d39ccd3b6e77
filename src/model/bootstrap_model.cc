#include "model/bootstrap_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "bootstrap/bootstrap_tree.h"
#include "bootstrap/rank_table.h"
#include "bootstrap/root.h"
#include "bootstrap/wire.h"
#include "model/named_values.h"

namespace loom::model {
namespace {

constexpr double kRecordBytes = sizeof(Hello) + sizeof(RankInfo);  // a rank's record, to a leader and on to the rendezvous

// Microseconds to move `bytes` at `gbs` GB/s.
double transferUs(double bytes, double gbs) { return gbs > 0 ? bytes / (gbs * 1e3) : 0; }

// The tree of hosts as bootstrap_tree.h shapes it: each host's ranks, the ranks under its leader,
// its child hosts, and the depth.
struct Walk {
  std::vector<int> ranksOf;     // by host
  std::vector<int> subtree;     // ranks under each host's leader, its own host's included
  std::vector<int> children;    // child hosts
  int depth = 0;
};

Walk walkHosts(int ranks, int perHost) {
  Walk w;
  const int hosts = (ranks + perHost - 1) / perHost;
  w.ranksOf.assign(static_cast<size_t>(hosts), perHost);
  if (ranks % perHost != 0) w.ranksOf.back() = ranks % perHost;
  w.subtree = w.ranksOf;
  w.children.assign(static_cast<size_t>(hosts), 0);
  for (int h = hosts - 1; h > 0; --h) {  // children have larger indices: their subtrees are done first
    w.subtree[static_cast<size_t>(parentHost(h))] += w.subtree[static_cast<size_t>(h)];
    ++w.children[static_cast<size_t>(parentHost(h))];
  }
  for (int h = hosts - 1, d = 0; h > 0; h = parentHost(h)) w.depth = ++d;
  return w;
}

struct ConstantField {
  const char* name;
  double BootstrapConstants::*field;
};
constexpr ConstantField kConstantFields[] = {
    {"rank_start_us", &BootstrapConstants::rankStartUs},   {"join_us", &BootstrapConstants::joinUs},
    {"connection_us", &BootstrapConstants::connectionUs}, {"record_us", &BootstrapConstants::recordUs},
    {"table_rank_us", &BootstrapConstants::tableRankUs},  {"message_us", &BootstrapConstants::messageUs},
    {"copy_gbs", &BootstrapConstants::copyGbs},           {"thread_start_us", &BootstrapConstants::threadStartUs},
};

}  // namespace

Status parseBootstrapConstants(const std::string& text, BootstrapConstants* out) {
  for (const NamedValue& entry : splitNamedValues(text)) {
    const ConstantField* f = std::find_if(std::begin(kConstantFields), std::end(kConstantFields),
                                          [&](const ConstantField& c) { return entry.name == c.name; });
    if (f == std::end(kConstantFields)) {
      std::string known;
      for (const ConstantField& c : kConstantFields) known += std::string(known.empty() ? "" : ", ") + c.name;
      return invalidArgument("bootstrap constant '{}' is not one of {}", entry.name, known);
    }
    double v = 0;
    if (!parseNumber(entry.value, &v) || !(v >= 0))
      return invalidArgument("bootstrap constant {}='{}' is not a non-negative number", entry.name, entry.value);
    out->*(f->field) = v;
  }
  return Status::Ok();
}

std::string formatBootstrapConstants(const BootstrapConstants& c) {
  std::string text;
  for (const ConstantField& f : kConstantFields) text += fmt::format("{}{}={:.4g}", text.empty() ? "" : ",", f.name, c.*(f.field));
  return text;
}

BootstrapPrediction predictBootstrap(const BootstrapJob& job, const BootstrapConstants& c) {
  BootstrapPrediction p;
  const int n = std::max(1, job.ranks);
  const int r = std::clamp(job.ranksPerHost, 1, n);
  const Walk w = walkHosts(n, r);
  const int hosts = static_cast<int>(w.ranksOf.size());
  const double lat = job.netLatencyUs;
  const double b = static_cast<double>(job.gatherBytes);
  const double all = static_cast<double>(n) * b;  // an allGather's result
  p.hosts = hosts;
  p.depth = w.depth;
  p.tableBytes = encodedRankTableBytes(static_cast<size_t>(n), static_cast<size_t>(hosts), static_cast<size_t>(hosts));
  const double S = static_cast<double>(p.tableBytes);
  const double framedTable = sizeof(Hello) + sizeof(Frame) + S;  // a table handed down one edge
  const double decodeUs = n * c.tableRankUs;
  const int batches = r > 1 ? 2 : 1;  // a leader's own record at once, its host's ranks' as they join

  // ---- every party's load ----
  auto consider = [&p](const BootstrapLoad& load) {
    if (load.bytes > p.busiestBytes.bytes) p.busiestBytes = load;
    if (load.sockets > p.busiestSockets.sockets) p.busiestSockets = load;
  };
  consider({"the rendezvous", n * kRecordBytes + framedTable, 1 + std::min(static_cast<int>(kRendezvousMaxOpen), hosts * batches)});
  for (int h = 0; h < hosts; ++h) {
    const double locals = w.ranksOf[static_cast<size_t>(h)] - 1;
    const double kids = w.children[static_cast<size_t>(h)];
    const bool parent = h > 0;
    double bytes = locals * kRecordBytes + (locals + 1) * kRecordBytes + locals * sizeof(int32_t);  // joins, batches, answers
    bytes += framedTable + kids * framedTable;                                   // the table, in and down
    bytes += locals * (sizeof(Frame) + sizeof(TableFileRef) + 1);                // the table file, told and taken
    if (b > 0) {
      bytes += (w.subtree[static_cast<size_t>(h)] - 1) * b;                      // parts up to this leader
      if (parent) bytes += w.subtree[static_cast<size_t>(h)] * b + all;          // its subtree up, the result down
      bytes += (kids + locals) * all;                                            // the result to children and locals
    }
    bytes += 2 * (locals + kids + (parent ? 1 : 0));                             // the barrier
    // Its listener and its host's name, its host's ranks, its parent and its children.
    consider({fmt::format("the leader of host {}", h), bytes, 2 + static_cast<int>(locals) + (parent ? 1 : 0) + static_cast<int>(kids)});
  }
  if (r > 1)
    consider({"a rank of host 0", kRecordBytes + sizeof(int32_t) + sizeof(Frame) + sizeof(TableFileRef) + 1 + b + all + 2, 2});

  // ---- the critical path on a cluster ----
  // Ranks start at once; a leader takes its host's ranks one after another, sending its own record at
  // once and the others' when they are in; the rendezvous takes every connection and record in turn.
  const double firstArrival = c.rankStartUs + c.connectionUs / 2 + lat;
  const double lastArrival = c.rankStartUs + (r - 1) * c.joinUs / 2 + c.connectionUs / 2 + lat;
  const double rendezvousWork = hosts * batches * c.connectionUs / 2 + n * c.recordUs;
  const double recordsIn = std::max(lastArrival, firstArrival + rendezvousWork);
  // The table: encoded, to host 0's leader, then down the tree (each leader connects to its children
  // one after another), each leader decoding it; then to each host's ranks through the table file.
  const double edgeUs = 2 * lat + c.connectionUs / 2 + transferUs(framedTable, job.netGbs);
  double tableUs = recordsIn + n * c.tableRankUs + edgeUs + lat + decodeUs;
  tableUs += w.depth * (kLeaderFanout * edgeUs + lat + decodeUs);
  tableUs += transferUs(S, c.copyGbs) + (r - 1) * c.messageUs + decodeUs + c.messageUs;
  p.tableUs = tableUs;
  // The allGather: the parts up (a leader takes its host's ranks', then its children's), the result
  // down (to each child in turn, then to each local rank).
  const double upUs = (r - 1) * c.messageUs + w.depth * (lat + kLeaderFanout * c.messageUs) + transferUs(n * b, job.netGbs);
  const double downUs = w.depth * (lat + kLeaderFanout * (c.messageUs + transferUs(all, job.netGbs))) +
                        (r - 1) * (c.messageUs + transferUs(all, c.copyGbs));
  p.gatherUs = b > 0 ? upUs + downUs : 0;
  // The barrier: a byte up and a byte down the same path.
  p.barrierUs = 2 * ((r - 1) * c.messageUs + w.depth * (lat + kLeaderFanout * c.messageUs));
  p.clusterUs = p.tableUs + p.gatherUs + p.barrierUs;

  // ---- every party's CPU, summed ----
  const double edges = hosts;  // the rendezvous to host 0, and each other host from its parent
  double cpu = n * (c.rankStartUs + c.threadStartUs);
  cpu += (n - hosts) * c.joinUs + hosts * batches * c.connectionUs + n * c.recordUs;
  cpu += n * c.tableRankUs + edges * (c.connectionUs + transferUs(2 * S, c.copyGbs));
  const int processes = (n + std::max(1, job.ranksPerProcess) - 1) / std::max(1, job.ranksPerProcess);
  // Each process decodes the table once; each leader then walks it for its tree (BootstrapTree::of).
  cpu += processes * decodeUs + hosts * decodeUs + (n - hosts) * 2 * c.messageUs;
  if (b > 0) cpu += (n - 1) * 2 * c.messageUs + transferUs(2.0 * n * all, c.copyGbs);
  cpu += (n - 1) * 2 * c.messageUs;  // the barrier
  p.totalCpuUs = cpu;
  return p;
}

}  // namespace loom::model
