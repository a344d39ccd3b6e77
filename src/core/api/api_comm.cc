// C API: versions, errors, communicator lifecycle and queries, custom reduction operators.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/datatype.h"
#include "base/log.h"
#include "bootstrap/unique_id.h"
#include "core/api/api_result.h"
#include "core/communicator.h"
#include "core/run/group.h"
#include "device/device_layer.h"

using namespace loom;

namespace loom {

// Calls still leaving (a released operation recording its error) finish before the parts stop and the
// memory goes.
void destroyComm(loomComm_t comm) {
  waitForCommCalls(comm);
  comm->shutdown();
  delete comm;
}

Status createCommunicator(loomComm_t* out, int nranks, const loomUniqueId& id, int rank, const loomConfig_t* config,
                          int cudaDevice) {
  if (out == nullptr) return invalidArgument("comm pointer is NULL");
  *out = nullptr;
  auto comm = std::make_unique<loomComm>();
  comm->cudaDevice = cudaDevice;
  Status st = initCommunicator(comm.get(), nranks, id, rank, config);
  if (!st.ok()) return st;
  *out = comm.release();
  return Status::Ok();
}

}  // namespace loom

namespace {

// How long loomCommDestroy waits for network peers to close too (TransportSet::closeNet).
constexpr int64_t kNetGoodbyeMs = 2000;

Status initRank(loomComm_t* out, int nranks, const loomUniqueId& id, int rank, const loomConfig_t* config,
                int cudaDevice) {
  return createCommunicator(out, nranks, id, rank, config, cudaDevice);
}

// loomCommInitRank(Config) inside a group: the communicator is created at the group's outermost end
// (group.h, deferToGroupEnd), on the CUDA device current now, from a copy of the config (the caller's
// may be gone by then); *out is NULL until that end.
Status deferInitRank(const char* api, loomComm_t* out, int nranks, const loomUniqueId& id, int rank,
                     const loomConfig_t* config) {
  if (!out) return invalidArgument("{}: comm is NULL", api);
  *out = nullptr;
  struct Deferred {
    bool hasConfig = false;
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    std::string name;
  };
  auto copy = std::make_shared<Deferred>();
  if (config) {
    CommSettings checked;  // a bad config is refused now, as outside a group
    LOOM_TRY(readCommSettings(config, &checked).withContext(api));
    std::memcpy(&copy->config, config, std::min(config->size, sizeof copy->config));
    if (config->commName) copy->name = config->commName;
    copy->hasConfig = true;
  }
  const int device = device::cudaUsable() ? device::activeDevice() : -1;
  deferToGroupEnd([=]() {
    if (copy->hasConfig && !copy->name.empty()) copy->config.commName = copy->name.c_str();
    return initRank(out, nranks, id, rank, copy->hasConfig ? &copy->config : nullptr, device);
  });
  return Status::Ok();
}

}  // namespace

extern "C" {

LOOM_API loomResult_t loomGetVersion(int* version) {
  return apiCall(nullptr, [&]() -> Status {
    if (!version) return invalidArgument("loomGetVersion: version is NULL");
    *version = LOOM_VERSION_CODE;
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomGetMemoryKinds(int* kinds) {
  return apiCall(nullptr, [&]() -> Status {
    if (!kinds) return invalidArgument("loomGetMemoryKinds: kinds is NULL");
    *kinds = LOOM_MEMORY_HOST | (device::cudaUsable() ? LOOM_MEMORY_CUDA : 0);
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomMemAlloc(void** ptr, size_t size) {
  return apiCall(nullptr, [&]() -> Status {
    if (!ptr) return invalidArgument("loomMemAlloc: ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return invalidArgument("loomMemAlloc: size is 0");
    return device::allocateDeviceMemory(size, ptr).withContext(fmt::format("loomMemAlloc of {} bytes", size));
  });
}

LOOM_API loomResult_t loomMemFree(void* ptr) {
  return apiCall(nullptr, [&]() -> Status {
    if (!ptr) return Status::Ok();
    return device::freeDeviceMemory(ptr).withContext("loomMemFree");
  });
}

LOOM_API const char* loomGetErrorString(loomResult_t result) {
  switch (result) {
    case loomSuccess: return "no error";
    case loomUnhandledCudaError: return "unhandled cuda error (run with LOOM_DEBUG=INFO for details)";
    case loomSystemError: return "unhandled system error (run with LOOM_DEBUG=INFO for details)";
    case loomInternalError: return "internal error - please report this issue to the Loom developers";
    case loomInvalidArgument: return "invalid argument (run with LOOM_DEBUG=WARN for details)";
    case loomInvalidUsage: return "invalid usage (run with LOOM_DEBUG=WARN for details)";
    case loomRemoteError: return "remote process exited or there was a network error";
    case loomInProgress: return "Loom operation in progress";
    case loomTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

LOOM_API const char* loomGetLastError(loomComm_t comm) {
  if (comm == nullptr) return threadLastError();
  std::lock_guard<std::mutex> lock(comm->errorMutex);
  return comm->lastError.c_str();
}

LOOM_API loomResult_t loomGetUniqueId(loomUniqueId* uniqueId) {
  return apiCall(nullptr, [&]() -> Status {
    if (!uniqueId) return invalidArgument("loomGetUniqueId: uniqueId is NULL");
    UniqueIdData data;
    LOOM_TRY(createUniqueId(&data));
    *uniqueId = encodeUniqueId(data);
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomCommInitRank(loomComm_t* comm, int nranks, loomUniqueId commId, int rank) {
  return apiCall(nullptr, [&] {
    if (inGroup()) return deferInitRank("loomCommInitRank", comm, nranks, commId, rank, nullptr);
    return initRank(comm, nranks, commId, rank, nullptr, -1);
  });
}

LOOM_API loomResult_t loomCommInitRankConfig(loomComm_t* comm, int nranks, loomUniqueId commId, int rank,
                                             loomConfig_t* config) {
  return apiCall(nullptr, [&] {
    if (inGroup()) return deferInitRank("loomCommInitRankConfig", comm, nranks, commId, rank, config);
    return initRank(comm, nranks, commId, rank, config, -1);
  });
}

LOOM_API loomResult_t loomCommInitAll(loomComm_t* comms, int ndev, const int* devlist) {
  return apiCall(nullptr, [&]() -> Status {
    if (!comms) return invalidArgument("loomCommInitAll: comms is NULL");
    if (ndev < 1) return invalidArgument("loomCommInitAll: ndev {} must be at least 1", ndev);
    if (devlist) LOOM_TRY(device::checkDeviceList(ndev, devlist));  // a clear error without CUDA or with a bad device
    UniqueIdData data;
    LOOM_TRY(createUniqueId(&data));
    loomUniqueId id = encodeUniqueId(data);
    std::vector<Status> results(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i)
      threads.emplace_back([&, i] { results[i] = initRank(&comms[i], ndev, id, i, nullptr, devlist ? devlist[i] : -1); });
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (results[i].ok()) continue;
      for (int j = 0; j < ndev; ++j) {
        if (comms[j]) destroyComm(comms[j]);  // a rank whose init failed left no communicator
        comms[j] = nullptr;
      }
      return results[i].withContext(fmt::format("loomCommInitAll rank {}", i));
    }
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t* newcomm, loomConfig_t* config) {
  return apiCall(comm, [&]() -> Status {
    if (!comm) return invalidArgument("loomCommSplit: comm is NULL");
    if (!newcomm) return invalidArgument("loomCommSplit: newcomm is NULL");
    if (color < 0 && color != LOOM_SPLIT_NOCOLOR)
      return invalidArgument("loomCommSplit: color {} must be >= 0 or LOOM_SPLIT_NOCOLOR", color);
    *newcomm = nullptr;
    std::lock_guard<std::mutex> busy(comm->busy);
    struct Entry {
      int32_t color, key, rank;
    };
    Entry mine{color, key, comm->rank};
    std::vector<Entry> all(static_cast<size_t>(comm->nranks));
    LOOM_TRY(comm->bootstrap->allGather(&mine, all.data(), sizeof(Entry)).withContext("loomCommSplit"));
    std::vector<Entry> members;
    for (const Entry& e : all)
      if (e.color == color && color != LOOM_SPLIT_NOCOLOR) members.push_back(e);
    std::sort(members.begin(), members.end(),
              [](const Entry& a, const Entry& b) { return a.key != b.key ? a.key < b.key : a.rank < b.rank; });
    // The first member of each colour starts a rendezvous; everyone learns every colour's id.
    loomUniqueId offer;
    std::memset(&offer, 0, sizeof(offer));
    if (!members.empty() && members[0].rank == comm->rank) {
      UniqueIdData data;
      LOOM_TRY(createUniqueId(&data));
      offer = encodeUniqueId(data);
    }
    std::vector<loomUniqueId> ids(static_cast<size_t>(comm->nranks));
    LOOM_TRY(comm->bootstrap->allGather(&offer, ids.data(), sizeof(offer)).withContext("loomCommSplit"));
    if (members.empty()) return Status::Ok();
    int newRank = static_cast<int>(std::find_if(members.begin(), members.end(),
                                                [&](const Entry& e) { return e.rank == comm->rank; }) -
                                   members.begin());
    loomConfig_t inherited = LOOM_CONFIG_INITIALIZER;
    if (!config) {
      inherited.commName = comm->settings.name.c_str();
      inherited.timeoutMs = static_cast<int>(comm->settings.timeoutMs);
      config = &inherited;
    }
    return initRank(newcomm, static_cast<int>(members.size()), ids[members[0].rank], newRank, config, comm->cudaDevice)
        .withContext("loomCommSplit");
  });
}

LOOM_API loomResult_t loomCommFinalize(loomComm_t comm) {
  return apiCall(comm, [&]() -> Status {
    if (!comm) return invalidArgument("loomCommFinalize: comm is NULL");
    std::lock_guard<std::mutex> busy(comm->busy);
    if (comm->engine) LOOM_TRY(comm->engine->wait(comm->opCount, -1));  // flush queued operations
    comm->finalized = true;
    return Status::Ok();
  });
}

// Destroy and abort are guarded without the communicator: they wait until no call guarded on it is in
// flight, and then free it.
LOOM_API loomResult_t loomCommDestroy(loomComm_t comm) {
  return apiCall(nullptr, [&]() -> Status {
    if (!comm) return invalidArgument("loomCommDestroy: comm is NULL");
    {
      std::lock_guard<std::mutex> busy(comm->busy);
      if (comm->transports && comm->transports->hasNetPeers() && !comm->aborted.load()) {
        comm->engine.reset();  // its queued operations end first; then nothing drives the connections beside us
        if (comm->asyncError.load() == loomSuccess) {
          // Network peers may still be reading what this rank sent last: wait for their goodbyes, a while.
          const int64_t timeoutMs = comm->settings.timeoutMs;
          comm->transports->closeNet(timeoutMs > 0 ? std::min<int64_t>(timeoutMs, kNetGoodbyeMs) : kNetGoodbyeMs);
        }
      }
    }
    destroyComm(comm);
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomCommAbort(loomComm_t comm) {
  return apiCall(nullptr, [&]() -> Status {
    if (!comm) return invalidArgument("loomCommAbort: comm is NULL");
    comm->aborted.store(true);
    Status reason(loomRemoteError, comm->describe() + " was aborted");
    markCommFailed(comm, reason, false);
    // Wait for a running operation to notice the abort and leave, then tell socket peers and free.
    {
      std::lock_guard<std::mutex> busy(comm->busy);
      comm->engine.reset();
      if (comm->transports) comm->transports->markFailed(reason.message(), true);
    }
    destroyComm(comm);
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t* asyncError) {
  return apiCall(comm, [&]() -> Status {
    if (!comm || !asyncError) return invalidArgument("loomCommGetAsyncError: NULL argument");
    if (comm->device) comm->device->poll();  // a finished plan kernel whose lanes failed fails the communicator now
    *asyncError = static_cast<loomResult_t>(comm->asyncError.load());
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomCommDeviceProfile(loomComm_t comm, loomDeviceProfile_t* profile, int reset) {
  return apiCall(comm, [&]() -> Status {
    if (!comm || !profile) return invalidArgument("loomCommDeviceProfile: NULL argument");
    if (!comm->device)
      return errorStatus(loomInvalidUsage, "loomCommDeviceProfile: {} has no plan kernels (a build without CUDA)",
                         comm->describe());
    return comm->device->profile(reset != 0, profile);
  });
}

LOOM_API loomResult_t loomCommCount(const loomComm_t comm, int* count) {
  return apiCall(comm, [&]() -> Status {
    if (!comm || !count) return invalidArgument("loomCommCount: NULL argument");
    *count = comm->nranks;
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomCommCuDevice(const loomComm_t comm, int* device) {
  return apiCall(comm, [&]() -> Status {
    if (!comm || !device) return invalidArgument("loomCommCuDevice: NULL argument");
    *device = comm->cudaDevice;
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomCommUserRank(const loomComm_t comm, int* rank) {
  return apiCall(comm, [&]() -> Status {
    if (!comm || !rank) return invalidArgument("loomCommUserRank: NULL argument");
    *rank = comm->rank;
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomRedOpCreatePreMulSum(loomRedOp_t* op, void* scalar, loomDataType_t datatype,
                                               loomScalarResidence_t residence, loomComm_t comm) {
  return apiCall(comm, [&]() -> Status {
    if (!comm) return invalidArgument("loomRedOpCreatePreMulSum: comm is NULL");
    if (!op || !scalar) return invalidArgument("loomRedOpCreatePreMulSum: op or scalar is NULL");
    if (!isValidDataType(datatype)) return invalidArgument("loomRedOpCreatePreMulSum: unknown datatype {}", static_cast<int>(datatype));
    if (residence != loomScalarHostImmediate && residence != loomScalarDevice)
      return invalidArgument("loomRedOpCreatePreMulSum: unknown scalar residence {}", static_cast<int>(residence));
    CustomRedOp custom;
    custom.inUse = true;
    custom.dtype = datatype;
    custom.residence = residence;
    if (residence == loomScalarHostImmediate)
      std::memcpy(custom.immediate, scalar, dataTypeSize(datatype));
    else
      custom.pointer = scalar;  // read at each use, as NCCL reads a device scalar when the kernel runs
    std::lock_guard<std::mutex> busy(comm->busy);
    auto free = std::find_if(comm->customOps.begin(), comm->customOps.end(), [](const CustomRedOp& c) { return !c.inUse; });
    size_t slot = static_cast<size_t>(free - comm->customOps.begin());
    if (free == comm->customOps.end()) comm->customOps.push_back(custom);
    else *free = custom;
    *op = static_cast<loomRedOp_t>(loomNumOps + static_cast<int>(slot));
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomRedOpDestroy(loomRedOp_t op, loomComm_t comm) {
  return apiCall(comm, [&]() -> Status {
    if (!comm) return invalidArgument("loomRedOpDestroy: comm is NULL");
    std::lock_guard<std::mutex> busy(comm->busy);
    size_t slot = static_cast<size_t>(static_cast<int>(op) - loomNumOps);
    if (static_cast<int>(op) < loomNumOps || slot >= comm->customOps.size() || !comm->customOps[slot].inUse)
      return invalidArgument("loomRedOpDestroy: {} is not a live custom operator of this communicator", static_cast<int>(op));
    comm->customOps[slot].inUse = false;
    return Status::Ok();
  });
}

}  // extern "C"

extern "C" {

LOOM_API loomResult_t loomCommLastOpId(loomComm_t comm, uint64_t* opId) {
  return apiCall(comm, [&]() -> Status {
    if (!comm || !opId) return invalidArgument("loomCommLastOpId: NULL argument");
    *opId = comm->opCount;
    return Status::Ok();
  });
}

// loomInProgress is a state, not an error: finishCall returns it without recording a message.
LOOM_API loomResult_t loomCommWaitOp(loomComm_t comm, uint64_t opId, int64_t timeoutMs) {
  return apiCall(comm, [&]() -> Status {
    if (!comm) return invalidArgument("loomCommWaitOp: comm is NULL");
    if (opId > comm->opCount)
      return invalidArgument("loomCommWaitOp: operation {} was never issued (last is {})", opId, comm->opCount.load());
    if (comm->engine) return comm->engine->wait(opId, timeoutMs);
    // A blocking communicator's operations were complete when their calls returned.
    const int error = comm->asyncError.load();
    if (error == loomSuccess) return Status::Ok();
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    return Status(static_cast<loomResult_t>(error), comm->fatalError);
  });
}

}  // extern "C"
