// C API: going on without lost ranks (revoke, shrink) and admitting new ones (grow). loom.h says what
// each call promises; here is how. Shrink repeats no rendezvous of the parent: the parent's init
// already told every rank where every other one listens (the bootstrap's table), so the first
// remaining rank starts the child's rendezvous and hands its id to each other remaining rank in a
// message of its own; an excluded rank is never asked for anything, and one that dies meanwhile
// makes the others fail within the timeout instead of waiting for it.
#include <algorithm>
#include <cstring>
#include <vector>

#include "bootstrap/unique_id.h"
#include "core/api/api_result.h"
#include "core/communicator.h"

using namespace loom;

namespace {

// Tags the messages that carry a shrink's id (Bootstrap::sendMessage): this marks the shrink and its count.
constexpr int kShrinkTag = 0x53480000;

// Fails every outstanding operation of this rank on comm, and tells its peers (their waits on this
// rank fail with the reason); later calls are refused with it (checkCommUsable).
void revoke(loomComm_t comm, const std::string& why) {
  markCommFailed(comm, Status(loomRemoteError, fmt::format("{} was revoked ({})", comm->describe(), why)), false);
}

// After revoke(), with `busy` held (no operation drives the connections): the network peers are told
// too, so that their waits on this rank fail now rather than at their timeout.
void tellNetworkPeers(loomComm_t comm) {
  if (!comm->transports) return;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    reason = comm->fatalError;
  }
  comm->transports->markFailed(reason, true);
}

// Waits until no operation of this rank runs on comm (the caller holds `busy`): queued ones too.
void waitForOperations(loomComm_t comm) {
  if (comm->engine) (void)comm->engine->wait(comm->opCount, -1);  // their outcome is theirs to report
}

// The parent's config for a child made without one: its name and timeout.
loomConfig_t inheritedConfig(loomComm_t comm) {
  loomConfig_t c = LOOM_CONFIG_INITIALIZER;
  c.commName = comm->settings.name.c_str();
  c.timeoutMs = static_cast<int>(comm->settings.timeoutMs);
  return c;
}

// The first remaining rank makes the child's id and hands it to the others (a message each, through the
// parent's bootstrap); they take it from it. A rank that is gone is retried until the deadline, so
// that the first rank fails no sooner than the ranks it reached, which give up on the child then: all
// are ready for the next shrink together.
Status handOverChildId(loomComm_t comm, const std::vector<int>& remaining, int tag, int64_t timeoutMs,
                       loomUniqueId* id) {
  const int leader = remaining.front();
  const Deadline deadline = Deadline::afterMs(timeoutMs);
  if (comm->rank == leader) {
    UniqueIdData data;
    LOOM_TRY(createUniqueId(&data));
    *id = encodeUniqueId(data);
    for (int peer : remaining)
      if (peer != leader)
        LOOM_TRY(comm->bootstrap->sendMessage(peer, tag, id, sizeof(*id), deadline, true)
                     .withContext(fmt::format("handing the new id to rank {}", peer)));
    return Status::Ok();
  }
  std::vector<char> message;
  LOOM_TRY(comm->bootstrap->recvMessage(leader, tag, &message, deadline)
               .withContext(fmt::format("waiting for rank {} (the first remaining rank) to hand over the new id "
                                        "(every remaining rank must pass the same excludeRanks)", leader)));
  if (message.size() != sizeof(*id))
    return errorStatus(loomInternalError, "rank {} handed over a shrink's id of {} bytes", leader, message.size());
  std::memcpy(id, message.data(), sizeof(*id));
  return Status::Ok();
}

}  // namespace

extern "C" {

LOOM_API loomResult_t loomCommRevoke(loomComm_t comm, int revokeFlags) {
  return apiCall(comm, [&]() -> Status {
    if (!comm) return invalidArgument("loomCommRevoke: comm is NULL");
    if (revokeFlags != LOOM_REVOKE_DEFAULT)
      return invalidArgument("loomCommRevoke: revokeFlags {:#x} must be LOOM_REVOKE_DEFAULT", revokeFlags);
    revoke(comm, "loomCommRevoke");
    // A running operation notices and leaves; then this thread tells the network peers too.
    std::lock_guard<std::mutex> busy(comm->busy);
    waitForOperations(comm);
    tellNetworkPeers(comm);
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomCommShrink(loomComm_t comm, int* excludeRanks, int excludeRanksCount, loomComm_t* newcomm,
                                     loomConfig_t* config, int shrinkFlags) {
  return apiCall(comm, [&]() -> Status {
    if (!comm) return invalidArgument("loomCommShrink: comm is NULL");
    if (!newcomm) return invalidArgument("loomCommShrink: newcomm is NULL");
    *newcomm = nullptr;
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanks))
      return invalidArgument("loomCommShrink: {} excluded ranks at {}", excludeRanksCount, fmt::ptr(excludeRanks));
    if (shrinkFlags & ~LOOM_SHRINK_ABORT)
      return invalidArgument("loomCommShrink: shrinkFlags {:#x} has bits other than LOOM_SHRINK_ABORT", shrinkFlags);
    std::vector<bool> excluded(static_cast<size_t>(comm->nranks), false);
    for (int i = 0; i < excludeRanksCount; ++i) {
      const int r = excludeRanks[i];
      if (r < 0 || r >= comm->nranks)
        return invalidArgument("loomCommShrink: excluded rank {} is outside 0..{}", r, comm->nranks - 1);
      if (excluded[static_cast<size_t>(r)]) return invalidArgument("loomCommShrink: rank {} is excluded twice", r);
      if (r == comm->rank)
        return invalidArgument("loomCommShrink: rank {} excludes itself (an excluded rank does not call it)", r);
      excluded[static_cast<size_t>(r)] = true;
    }
    std::vector<int> remaining;
    for (int r = 0; r < comm->nranks; ++r)
      if (!excluded[static_cast<size_t>(r)]) remaining.push_back(r);
    if (shrinkFlags & LOOM_SHRINK_ABORT) revoke(comm, "loomCommShrink with LOOM_SHRINK_ABORT");
    std::lock_guard<std::mutex> busy(comm->busy);  // the parent's operations of this rank have ended
    waitForOperations(comm);
    if (shrinkFlags & LOOM_SHRINK_ABORT) tellNetworkPeers(comm);
    const int tag = kShrinkTag + comm->shrinks++;
    // Handing the id over waits as long as making the child may: the child's timeout.
    loomConfig_t inherited = inheritedConfig(comm);
    CommSettings child;
    LOOM_TRY(readCommSettings(config ? config : &inherited, &child));
    loomUniqueId id;
    LOOM_TRY(handOverChildId(comm, remaining, tag, child.timeoutMs, &id).withContext(comm->describe() + ": loomCommShrink"));
    const int newRank = static_cast<int>(std::find(remaining.begin(), remaining.end(), comm->rank) - remaining.begin());
    return createCommunicator(newcomm, static_cast<int>(remaining.size()), id, newRank, config ? config : &inherited,
                              comm->cudaDevice)
        .withContext(comm->describe() + ": loomCommShrink");
  });
}

LOOM_API loomResult_t loomCommGetUniqueId(loomComm_t comm, loomUniqueId* uniqueId) {
  return apiCall(comm, [&]() -> Status {
    if (!comm || !uniqueId) return invalidArgument("loomCommGetUniqueId: NULL argument");
    std::lock_guard<std::mutex> busy(comm->busy);
    UniqueIdData data;
    LOOM_TRY(createUniqueId(&data));
    *uniqueId = encodeUniqueId(data);
    comm->growId = *uniqueId;
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomCommGrow(loomComm_t comm, int nranks, const loomUniqueId* uniqueId, int rank,
                                   loomComm_t* newcomm, loomConfig_t* config) {
  return apiCall(comm, [&]() -> Status {
    if (!newcomm) return invalidArgument("loomCommGrow: newcomm is NULL");
    *newcomm = nullptr;
    if (!comm) {  // a joining rank
      if (!uniqueId) return invalidArgument("loomCommGrow: a joining rank (comm NULL) needs the id of loomCommGetUniqueId");
      if (rank < 0 || rank >= nranks)
        return invalidArgument("loomCommGrow: joining rank {} is outside 0..{}", rank, nranks - 1);
      return createCommunicator(newcomm, nranks, *uniqueId, rank, config, -1).withContext("loomCommGrow");
    }
    if (rank != -1 && rank != comm->rank)
      return invalidArgument("loomCommGrow: a rank of comm keeps its number {} (pass -1, not {})", comm->rank, rank);
    if (nranks <= comm->nranks)
      return invalidArgument("loomCommGrow: nranks {} must be larger than comm's {}", nranks, comm->nranks);
    std::lock_guard<std::mutex> busy(comm->busy);
    LOOM_TRY(checkCommUsable(comm));
    waitForOperations(comm);
    // The ranks of comm learn the id from the one that holds it (loomCommGetUniqueId, or passed).
    struct Offer {
      int32_t has = 0;
      loomUniqueId id;
    };
    Offer mine;
    std::memset(&mine.id, 0, sizeof(mine.id));
    if (uniqueId) mine.has = 1, mine.id = *uniqueId;
    else if (comm->growId) mine.has = 1, mine.id = *comm->growId;
    std::vector<Offer> offers(static_cast<size_t>(comm->nranks));
    LOOM_TRY(comm->bootstrap->allGather(&mine, offers.data(), sizeof(Offer)).withContext(comm->describe() + ": loomCommGrow"));
    auto holder = std::find_if(offers.begin(), offers.end(), [](const Offer& o) { return o.has != 0; });
    if (holder == offers.end())
      return errorStatus(loomInvalidUsage,
                         "{}: loomCommGrow: no rank of comm called loomCommGetUniqueId (or passed its id)", comm->describe());
    for (const Offer& o : offers)
      if (o.has && std::memcmp(&o.id, &holder->id, sizeof(o.id)) != 0)
        return errorStatus(loomInvalidUsage, "{}: loomCommGrow: ranks of comm hold different ids", comm->describe());
    comm->growId.reset();
    loomConfig_t inherited = inheritedConfig(comm);
    return createCommunicator(newcomm, nranks, holder->id, comm->rank, config ? config : &inherited, comm->cudaDevice)
        .withContext(comm->describe() + ": loomCommGrow");
  });
}

}  // extern "C"
