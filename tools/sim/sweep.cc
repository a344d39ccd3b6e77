#include "sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "algorithms/tuner.h"

namespace loom::sim_tool {
namespace {

// nccl-tests' size counts every rank's block for these: count = size / (nranks * elemSize).
bool totalOfBlocks(Collective coll) {
  return coll == Collective::AllGather || coll == Collective::ReduceScatter || coll == Collective::AlltoAll ||
         coll == Collective::Gather || coll == Collective::Scatter;
}

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

bool parseCollective(const std::string& name, Collective* coll) {
  std::string key;
  for (char c : name)
    if (c != '_' && c != '-') key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::pair<const char*, Collective> names[] = {
      {"allreduce", Collective::AllReduce},         {"broadcast", Collective::Broadcast},
      {"reduce", Collective::Reduce},               {"allgather", Collective::AllGather},
      {"reducescatter", Collective::ReduceScatter}, {"alltoall", Collective::AlltoAll},
      {"gather", Collective::Gather},               {"scatter", Collective::Scatter},
  };
  for (const auto& [text, value] : names) {
    if (key == text) {
      *coll = value;
      return true;
    }
  }
  return false;
}

bool parseBytes(const std::string& text, uint64_t* bytes) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    return false;
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  double scale = 1;
  if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M" || unit == "m") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) return false;
  if (!(value >= 0) || value * scale > 1.8e19) return false;
  *bytes = static_cast<uint64_t>(value * scale);
  return true;
}

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

Status runSweep(const MachineModel& machine, const SweepOptions& o, std::vector<SweepRow>* rows) {
  Tuner tuner(machine, o.rings);
  const uint64_t unit = o.elemSize * (totalOfBlocks(o.coll) ? static_cast<uint64_t>(machine.nranks) : 1);
  rows->clear();
  for (uint64_t size : sweepSizes(o)) {
    TuneRequest req;
    req.coll = o.coll;
    req.count = size / unit;
    if (req.count == 0) continue;  // smaller than one element per rank, as nccl-tests skips it
    req.elemSize = o.elemSize;
    req.slotBytes = o.slotBytes;
    req.maxChannels = o.maxChannels;
    req.forcedAlgorithm = o.algorithm;
    req.forcedChunkBytes = o.chunkBytes;
    req.forcedChannels = o.channels;
    TuneChoice choice;
    LOOM_TRY(tuner.choosePlan(req, &choice).withContext(fmt::format("{} bytes", size)));
    SweepRow row;
    row.bytes = req.count * unit;
    row.count = req.count;
    LOOM_TRY(tuner.predict(req, choice, &row.timeUs).withContext(fmt::format("{} bytes", size)));
    row.algorithm = algorithmName(choice.algorithm);
    row.channels = choice.nchannels;
    row.chunkBytes = choice.chunkElems * o.elemSize;
    // GB/s = 1e9 bytes/s; time in microseconds.
    row.algbwGbs = row.timeUs > 0 ? static_cast<double>(row.bytes) / (row.timeUs * 1e3) : 0;
    row.busbwGbs = row.algbwGbs * busFactor(o.coll, machine.nranks);
    row.note = choice.note;
    rows->push_back(std::move(row));
  }
  return Status::Ok();
}

std::string renderTable(const MachineModel& m, const SweepOptions& o, const std::vector<SweepRow>& rows) {
  std::string out = fmt::format(
      "# loom-sim {}: {} ranks, {} per node; intra {:g} GB/s {:g} us; {} NIC(s)/node {:g} GB/s {:g} us; "
      "step {:g} us; {} FIFO slots of {} B; up to {} channels\n",
      collectiveName(o.coll), m.nranks, m.ranksInNode(), m.intraGbs, m.intraLatencyUs, m.nicsPerNode, m.nicGbs,
      m.netLatencyUs, m.stepUs, m.fifoSlots, o.slotBytes, o.maxChannels);
  out += fmt::format("#{:>14} {:>14} {:>9} {:>8} {:>10} {:>14} {:>11} {:>11}\n", "size", "count", "algorithm",
                     "channels", "chunk", "time", "algbw", "busbw");
  out += fmt::format("#{:>14} {:>14} {:>9} {:>8} {:>10} {:>14} {:>11} {:>11}\n", "(B)", "(elements)", "", "", "(B)",
                     "(us)", "(GB/s)", "(GB/s)");
  std::string notes;
  for (const SweepRow& r : rows) {
    out += fmt::format(" {:>14} {:>14} {:>9} {:>8} {:>10} {:>14.2f} {:>11.2f} {:>11.2f}\n", r.bytes, r.count,
                       r.algorithm, r.channels, r.chunkBytes, r.timeUs, r.algbwGbs, r.busbwGbs);
    if (!r.note.empty() && notes.find(r.note) == std::string::npos) notes += "# note: " + r.note + "\n";
  }
  return out + notes;
}

nlohmann::json renderJson(const std::vector<SweepRow>& rows) {
  nlohmann::json list = nlohmann::json::array();
  for (const SweepRow& r : rows) {
    list.push_back({{"bytes", r.bytes},
                    {"algorithm", r.algorithm},
                    {"channels", r.channels},
                    {"chunk_bytes", r.chunkBytes},
                    {"time_us", r.timeUs},
                    {"algbw_gbs", r.algbwGbs},
                    {"busbw_gbs", r.busbwGbs}});
  }
  return list;
}

}  // namespace loom::sim_tool
