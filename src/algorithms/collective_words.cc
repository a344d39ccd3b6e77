#include "algorithms/collective_words.h"

#include <cctype>
#include <string>

namespace loom {

const char* collectiveWord(Collective coll) {
  switch (coll) {
    case Collective::AllReduce: return "allreduce";
    case Collective::AllGather: return "allgather";
    case Collective::ReduceScatter: return "reducescatter";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::AlltoAll: return "alltoall";
    case Collective::Gather: return "gather";
    case Collective::Scatter: return "scatter";
    case Collective::SendRecv: return "";
  }
  return "";
}

bool parseCollectiveWord(std::string_view word, Collective* coll) {
  std::string key;
  for (char c : word)
    if (c != '_') key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (Collective c : kWordedCollectives) {
    if (key == collectiveWord(c)) {
      *coll = c;
      return true;
    }
  }
  return false;
}

}  // namespace loom
