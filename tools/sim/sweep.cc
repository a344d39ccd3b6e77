#include "sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace loom::sim_tool {
namespace {

std::vector<uint64_t> sweepSizes(const SweepOptions& o) {
  std::vector<uint64_t> sizes;
  for (uint64_t b = std::max<uint64_t>(o.minBytes, 1); b <= o.maxBytes;) {
    sizes.push_back(b);
    uint64_t next = o.stepBytes > 0 ? b + o.stepBytes : static_cast<uint64_t>(std::ceil(static_cast<double>(b) * o.factor));
    if (next <= b) break;
    b = next;
  }
  return sizes;
}

}  // namespace

bool parseCollective(const std::string& name, loomModelCollective_t* coll) {
  std::string key;
  for (char c : name)
    if (c != '_' && c != '-') key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::pair<const char*, loomModelCollective_t> names[] = {
      {"allreduce", loomModelAllReduce},         {"broadcast", loomModelBroadcast},
      {"reduce", loomModelReduce},               {"allgather", loomModelAllGather},
      {"reducescatter", loomModelReduceScatter}, {"alltoall", loomModelAlltoAll},
      {"gather", loomModelGather},               {"scatter", loomModelScatter},
  };
  for (const auto& [text, value] : names) {
    if (key == text) {
      *coll = value;
      return true;
    }
  }
  return false;
}

bool runSweep(loomModel_t model, const SweepOptions& o, std::vector<loomModelPrediction_t>* rows,
              std::string* error) {
  rows->clear();
  for (uint64_t size : sweepSizes(o)) {
    loomModelRequest_t req = LOOM_MODEL_REQUEST_INITIALIZER;
    req.collective = o.coll;
    req.bytes = size;
    req.elemBytes = o.elemSize;
    req.algorithm = o.algorithm.empty() ? nullptr : o.algorithm.c_str();
    req.channels = o.channels;
    req.chunkBytes = o.chunkBytes;
    loomModelPrediction_t row;
    if (loomModelPredict(model, &req, &row) != loomSuccess) {
      *error = fmt::format("{} bytes: {}", size, loomGetLastError(nullptr));
      return false;
    }
    if (row.count == 0) continue;  // smaller than one element per rank, as nccl-tests skips it
    rows->push_back(row);
  }
  return true;
}

std::string renderTable(const loomModelMachine_t& m, const std::string& collName,
                        const std::vector<loomModelPrediction_t>& rows) {
  std::string out = fmt::format(
      "# loom-sim {}: {} ranks, {} per node; intra {:g} GB/s {:g} us; {} NIC(s)/node {:g} GB/s {:g} us; "
      "step {:g} us; launch {:g} us; {} FIFO slots of {} B; up to {} channels\n",
      collName, m.nranks, m.ranksPerNode, m.intraGbs, m.latencyUs, m.nicsPerNode, m.nicGbs, m.netLatencyUs, m.stepUs,
      m.launchUs, m.fifoSlots, m.slotBytes, m.maxChannels);
  out += fmt::format("#{:>14} {:>14} {:>9} {:>8} {:>10} {:>14} {:>11} {:>11}\n", "size", "count", "algorithm",
                     "channels", "chunk", "time", "algbw", "busbw");
  out += fmt::format("#{:>14} {:>14} {:>9} {:>8} {:>10} {:>14} {:>11} {:>11}\n", "(B)", "(elements)", "", "", "(B)",
                     "(us)", "(GB/s)", "(GB/s)");
  std::string notes;
  for (const loomModelPrediction_t& p : rows) {
    out += fmt::format(" {:>14} {:>14} {:>9} {:>8} {:>10} {:>14.2f} {:>11.2f} {:>11.2f}\n", p.bytes, p.count,
                       p.algorithm, p.channels, p.chunkBytes, p.timeUs, p.algbwGbs, p.busbwGbs);
    const std::string note = p.note;
    if (!note.empty() && notes.find(note) == std::string::npos) notes += "# note: " + note + "\n";
  }
  return out + notes;
}

nlohmann::json renderJson(const std::vector<loomModelPrediction_t>& rows) {
  nlohmann::json list = nlohmann::json::array();
  for (const loomModelPrediction_t& p : rows) {
    list.push_back({{"bytes", p.bytes},
                    {"algorithm", p.algorithm},
                    {"channels", p.channels},
                    {"chunk_bytes", p.chunkBytes},
                    {"time_us", p.timeUs},
                    {"algbw_gbs", p.algbwGbs},
                    {"busbw_gbs", p.busbwGbs}});
  }
  return list;
}

}  // namespace loom::sim_tool
