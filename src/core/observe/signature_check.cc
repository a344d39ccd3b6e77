#include "core/observe/signature_check.h"

#include <vector>

#include "base/datatype.h"
#include "core/communicator.h"

namespace loom {
namespace {

struct Signature {
  uint64_t seq;
  uint64_t count;
  int32_t coll;
  int32_t dtype;
  int32_t op;  // loomNumOps stands for every PreMulSum (their handles differ between ranks)
  int32_t root;
  bool operator==(const Signature&) const = default;
};

Signature signatureOf(const Operation& op, uint64_t seq) {
  return Signature{seq, op.count, static_cast<int32_t>(op.coll), static_cast<int32_t>(op.dtype),
                   isReduction(op.coll) ? std::min(op.op, static_cast<int>(loomNumOps)) : -1, isRooted(op.coll) ? op.root : -1};
}

std::string describe(const Signature& s) {
  std::string text = fmt::format("{} #{} (count {}, {}", collectiveName(static_cast<Collective>(s.coll)), s.seq, s.count,
                                 dataTypeName(static_cast<loomDataType_t>(s.dtype)));
  if (s.op >= 0) text += fmt::format(", {}", redOpName(s.op));
  if (s.root >= 0) text += fmt::format(", root {}", s.root);
  return text + ")";
}

}  // namespace

Status checkCollectiveSignature(loomComm_t comm, const Operation& op, uint64_t seq) {
  Signature mine = signatureOf(op, seq);
  std::vector<Signature> all(static_cast<size_t>(comm->nranks));
  LOOM_TRY(comm->bootstrap->allGather(&mine, all.data(), sizeof(mine)).withContext("LOOM_CHECK"));
  for (int r = 0; r < comm->nranks; ++r)
    if (!(all[static_cast<size_t>(r)] == all[0]))
      return errorStatus(loomInvalidUsage, "LOOM_CHECK: ranks disagree: rank 0 called {} but rank {} called {}",
                         describe(all[0]), r, describe(all[static_cast<size_t>(r)]));
  return Status::Ok();
}

}  // namespace loom
