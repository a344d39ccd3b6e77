// The communicator behind loomComm_t: one rank's membership in a group of ranks, with its bootstrap,
// its connections, its error state and its custom reduction operators.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/settings.h"
#include "base/status.h"
#include "algorithms/algorithm_rules.h"
#include "algorithms/tuner.h"
#include "bootstrap/bootstrap.h"
#include "core/run/async_engine.h"
#include "core/run/core_sharing.h"
#include "core/observe/flight_record.h"
#include "core/run/plan_cache.h"
#include "core/observe/state_service.h"
#include "core/run/wait_history.h"
#include "device/device_layer.h"
#include "core/observe/trace.h"
#include "topology/job_topology.h"
#include "topology/numa_binding.h"
#include "loom.h"
#include "transport/transport_set.h"

namespace loom {

// A PreMulSum operator made by loomRedOpCreatePreMulSum.
struct CustomRedOp {
  bool inUse = false;
  loomDataType_t dtype = loomFloat32;
  loomScalarResidence_t residence = loomScalarHostImmediate;
  unsigned char immediate[8] = {0};  // the scalar, when passed by value
  const void* pointer = nullptr;     // the scalar, when it stays in the caller's memory
};

struct CommSettings {
  std::string name;
  int64_t timeoutMs = 600000;
  size_t chunkBytes = 128 << 10;  // defaults: readCommSettings (communicator.cc)
  int nchannels = 2;
  size_t nslots = 4;
  std::string forcedTransport;
  bool netConnectEager = false;  // LOOM_NET_CONNECT=eager: every network connection at init
  bool blocking = true;
  bool checkSignatures = false;  // LOOM_CHECK
  // What the user forced on the tuner (unset/0: tuned). chunkBytes above is the transports' slot
  // either way; forcedChunkBytes is set only when LOOM_CHUNK_BYTES is.
  AlgorithmRules algorithmRules;  // LOOM_ALGO: the algorithm forced per collective and size
  uint64_t forcedChunkBytes = 0;
  int forcedChannels = 0;  // LOOM_NCHANNELS
  int ranksPerNode = 0;    // LOOM_RANKS_PER_NODE: emulate nodes of this many ranks; 0: by host
  int verifyPlans = -1;    // LOOM_VERIFY: 1 every plan, 0 none, -1 small ones (planner.cc)
  // Every setting above with its value and source (the first is LOOM_TIMEOUT_MS), for the init log
  // and the graph dump.
  std::vector<SettingOrigin> origins;
};

Status readCommSettings(const loomConfig_t* config, CommSettings* out);

}  // namespace loom

// A window (loomCommWindowRegister): its slot in the communicator's device layer (device/peer_windows.h).
struct loomWindow {
  loomComm* comm = nullptr;
  uint32_t slot = 0;
  bool registered = false;  // false until its registration ran (inside a group: at the group's end)
};

struct loomComm {
  int rank = 0;
  int nranks = 1;
  int cudaDevice = -1;
  loom::CommSettings settings;
  std::unique_ptr<loom::Bootstrap> bootstrap;
  std::unique_ptr<loom::TransportSet> transports;
  std::unique_ptr<loom::Tracer> tracer;  // written out when the communicator goes
  // Device buffers (src/device: plan kernels, stream-ordered staging in flight); made at init in CUDA
  // builds (null otherwise), so that an abort from any thread finds it.
  std::unique_ptr<loom::device::CommDevice> device;
  // Nonblocking communicators, and blocking ones once they ran a stream-ordered device operation.
  std::unique_ptr<loom::AsyncEngine> engine;

  std::atomic<bool> aborted{false};
  std::atomic<int> callsInFlight{0};  // API calls naming this communicator (core/api/api_result.h)
  std::atomic<int> asyncError{loomSuccess};
  bool finalized = false;
  std::mutex busy;  // held while an operation runs on this communicator

  std::mutex errorMutex;
  std::string lastError;
  std::string fatalError;  // the first error that broke the communicator

  std::atomic<uint64_t> opCount{0};  // written under `busy`, read by loomCommWaitOp from any thread
  // Where the ranks are: hosts, rings, NICs (core/job_setup.h), agreed by every rank at init.
  // The job's topology: shared by the rank threads of one process that all of a communicator's ranks
  // are (core/job_setup.cc), else this rank's own.
  std::shared_ptr<const loom::JobTopology> job;
  std::shared_ptr<const loom::SystemGraph> hostGraph;  // this rank's host, as the job topology used it
  // This rank's NUMA node, where its progress thread runs and its shared-memory FIFOs live.
  loom::NumaBinding numaBinding;
  // Pick algorithm, chunk and channels per call, for host memory and for plan kernels on device memory.
  // Every rank builds the same machine models from the job's topology, so every rank makes the same choice.
  std::unique_ptr<loom::Tuner> tuner;
  std::unique_ptr<loom::Tuner> deviceTuner;
  // Plan kernels on buffers in windows (loomCommWindowRegister): the device model with peer-memory
  // plans among the candidates, where rank processes share a GPU (device::DeviceFabric); null elsewhere.
  std::unique_ptr<loom::Tuner> windowTuner;
  std::vector<std::unique_ptr<loomWindow>> windows;  // registered, under `busy`
  // Keyed without rings or node shape: both are fixed for the communicator's lifetime.
  loom::PlanCache planCache;
  int64_t spinNs = 0;           // spin this long before sleeping (short when ranks outnumber cores)
  // How recent waits for peers ended: waiters spin briefly while they keep outlasting spinNs.
  std::unique_ptr<loom::WaitHistory> waitHistory;
  bool oversubscribed = false;  // more ranks on this host than cores we may run on
  bool mayMoveThreads = false;  // not oversubscribed, and LOOM_IGNORE_CPU_AFFINITY unset (core/run/core_sharing.h)
  // What a caller's thread (blocking operations, under `busy`) does about a peer on its core.
  std::unique_ptr<loom::CoreSharing> callerSharing;
  std::vector<loom::CustomRedOp> customOps;
  // The last operations issued and how far they completed, readable while the rank is wedged.
  loom::FlightRecord flight;
  // loomCommGetUniqueId's id for a coming loomCommGrow (core/api/api_elastic.cc), and how many shrinks this
  // communicator made (each tags its hand-over connections with the count: every rank calls them in order).
  std::optional<loomUniqueId> growId;
  int shrinks = 0;

  // "comm 'name' rank r/n" for messages.
  std::string describe() const;

  // Answers loom-doctor and the other ranks' state requests (core/observe/state_service.h).
  std::unique_ptr<loom::StateServing> stateServing;

  // Stops the communicator's parts and releases them, in an order that does not depend on where a
  // member is declared:
  //   1. stateServing: its answers read the flight record and the job;
  //   2. engine: finishes (or, once the communicator failed, gives up) every queued operation and opens
  //      their gates; its progress thread drives the transports and the device and reads the error
  //      state and the tuners;
  //   3. device: waits for its streams; its network lanes' proxy uses the transports;
  //   4. tracer: writes the trace file of what ran;
  //   5. transports: connections first, then the network provider under them (TransportSet::close);
  //   6. bootstrap: last, the other parts may exchange through it until they are gone.
  // Everything else is plain data. Destroy and abort call it (destroyComm) once no other call runs on
  // the communicator; the destructor calls it only to stop what a failed init left (after destroyComm
  // it finds nothing left to stop).
  void shutdown();
  ~loomComm() { shutdown(); }
};

namespace loom {

// Joins the communicator described by `id` as `rank` of `nranks` (blocks until all ranks joined).
Status initCommunicator(loomComm* comm, int nranks, const loomUniqueId& id, int rank, const loomConfig_t* config);
// A new communicator made by initCommunicator, on CUDA device `cudaDevice` (-1: none); *out is NULL on error.
Status createCommunicator(loomComm** out, int nranks, const loomUniqueId& id, int rank, const loomConfig_t* config,
                          int cudaDevice);
// Frees a communicator once no API call naming it is in flight.
void destroyComm(loomComm* comm);

// Ok when the communicator may start an operation; loomInvalidUsage when it was aborted, finalized
// or broken by an earlier error (which the message repeats).
Status checkCommUsable(loomComm* comm);

// Marks the communicator broken after a fatal error: peers are told, later calls are refused.
// `ownsConnections`: the caller is the thread that drives the connections (not a concurrent abort).
void markCommFailed(loomComm* comm, const Status& error, bool ownsConnections);

}  // namespace loom
