// The device API's host-side team helpers. A team is a strided set of world ranks (size, my index,
// stride). Loom gives no rank load/store access to another's memory (no windows), so each rank's
// load/store team (LSA) is itself alone, and its rail team (the ranks at the same LSA index across LSA
// teams) is the whole world: the answers follow from that, by NCCL's arithmetic.
#include <string>

#include "compat/exports.h"
#include "compat/last_error.h"

using namespace loom::compat;

namespace {

constexpr ncclTeam_t kNoTeam{0, -1, 0};

// The world team, or kNoTeam (and ncclGetLastError says why) for a communicator Loom refuses.
ncclTeam_t worldOf(ncclComm_t comm, const char* function) {
  int count = 0, rank = -1;
  if (loomCommCount(toLoom(comm), &count) != loomSuccess || loomCommUserRank(toLoom(comm), &rank) != loomSuccess) {
    fail(ncclInvalidArgument, std::string(function) + ": " + loomGetLastError(toLoom(comm)));
    return kNoTeam;
  }
  return ncclTeam_t{count, rank, 1};
}

}  // namespace

LOOM_NCCL_EXPORT ncclTeam_t pncclTeamWorld(ncclComm_t comm) {
  forgetError();
  return worldOf(comm, "ncclTeamWorld");
}
LOOM_NCCL_ALIAS(ncclTeamWorld)

LOOM_NCCL_EXPORT ncclTeam_t pncclTeamLsa(ncclComm_t comm) {
  forgetError();
  const ncclTeam_t world = worldOf(comm, "ncclTeamLsa");
  return world.nRanks ? ncclTeam_t{1, 0, 1} : kNoTeam;
}
LOOM_NCCL_ALIAS(ncclTeamLsa)

LOOM_NCCL_EXPORT ncclTeam_t pncclTeamRail(ncclComm_t comm) {
  forgetError();
  return worldOf(comm, "ncclTeamRail");
}
LOOM_NCCL_ALIAS(ncclTeamRail)

// Team member `rank` of `team` (which holds the caller at team.rank) as a world rank.
LOOM_NCCL_EXPORT int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  forgetError();
  const ncclTeam_t world = worldOf(comm, "ncclTeamRankToWorld");
  return world.rank + (rank - team.rank) * team.stride;
}
LOOM_NCCL_ALIAS(ncclTeamRankToWorld)

// ... and as an index in the caller's LSA team (itself alone: 0 for the caller, outside it otherwise).
LOOM_NCCL_EXPORT int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  forgetError();
  return pncclTeamRankToWorld(comm, team, rank) - worldOf(comm, "ncclTeamRankToLsa").rank;
}
LOOM_NCCL_ALIAS(ncclTeamRankToLsa)
