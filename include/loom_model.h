/*
 * Loom's cost model: what Loom would choose and how long it would take, for a job of any size on
 * machines described by a topology file (or this machine), without running it.
 *
 * A model stands for a job of `world` ranks in nodes of `ranksPerNode`, each node the host a topology
 * describes. It answers for any group of the job's ranks as a communicator of exactly those ranks
 * would: the same placement of ranks on GPUs and NICs, the same machine model, the same tuner and
 * simulated plans as the library runs (loom-sim and the Python planner, loom.plan, answer through it).
 * Errors return loomInvalidArgument (or loomSystemError) with loomGetLastError(NULL)'s text on the
 * calling thread. A model is not shared between threads without a lock of the caller's.
 */
#ifndef LOOM_MODEL_H_
#define LOOM_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loomModel* loomModel_t;

typedef enum {
  loomModelMemoryAuto = 0,   /* device memory, unless the topology has no GPU */
  loomModelMemoryHost = 1,   /* host buffers, as a communicator's host operations run them */
  loomModelMemoryDevice = 2  /* device buffers over the GPU fabric (plan kernels) */
} loomModelMemory_t;

typedef struct {
  size_t size;              /* sizeof(loomModelConfig_t): set by LOOM_MODEL_CONFIG_INITIALIZER */
  int world;                /* ranks in the job, at least 1 */
  int ranksPerNode;         /* 0: the topology's GPU count when it divides world, else all on one node */
  const char* topology;     /* NULL or "": LOOM_TOPO_FILE or this machine; "none": no topology (the
                               machine fields alone); else an hwloc or NCCL topology XML file of one node */
  loomModelMemory_t memory;
  /* NVSwitch bandwidth to add to the topology, GB/s per GPU and direction (0: none). For files that
     leave NVLink out because NCCL reads it from NVML at run time (Azure's NDv4 file): every GPU joins
     one NVSwitch at this rate (an A100's 12 NVLinks count 240 GB/s). */
  double nvswitchGbs;
  /* Machine fields set after the topology's, "name=value" separated by commas: intra_gbs,
     latency_us (also net_latency_us unless that is given), net_latency_us, nics_per_node, nic_gbs,
     step_us, launch_us (a device operation's start: 8.4 us on a topology with GPUs, else 0),
     copy_gbs, fifo_slots. NULL or "": none. */
  const char* machine;
  int maxChannels;          /* channels a communicator has: 0 for 16 (device) or 2 (host) */
  size_t slotBytes;         /* the transports' largest message: 0 for a communicator's (128 KiB; on
                               device memory its plan kernels' FIFO slot: 512 KiB on one node) */
  const char* calibration;  /* host memory: a LOOM_CALIBRATION_FILE; NULL: measured (or copy_gbs) */
} loomModelConfig_t;

#define LOOM_MODEL_CONFIG_INITIALIZER \
  { sizeof(loomModelConfig_t), 1, 0, NULL, loomModelMemoryAuto, 0.0, NULL, 0, 0, NULL }

typedef enum {
  loomModelAllReduce = 0,
  loomModelAllGather = 1,
  loomModelReduceScatter = 2,
  loomModelBroadcast = 3,
  loomModelReduce = 4,
  loomModelAlltoAll = 5,
  loomModelGather = 6,
  loomModelScatter = 7
} loomModelCollective_t;

typedef struct {
  loomModelCollective_t collective;
  size_t bytes;           /* nccl-tests' size: the whole buffer (every rank's block for all_gather,
                             reduce_scatter, all_to_all, gather and scatter) */
  int elemBytes;          /* bytes per element, at least 1 */
  const int* ranks;       /* the group's job ranks; NULL: the whole job */
  int nranks;
  int concurrent;         /* nonzero: every group of this one's shape runs at once, sharing the NICs */
  int root;               /* broadcast, reduce, gather, scatter: index in the group */
  const char* algorithm;  /* force one (ring, tree, direct, hier, oneshot), or rules by collective and size
                             in LOOM_ALGO's syntax ("allreduce:0-64K:oneshot,64K-:ring", matched against
                             `bytes` in whole elements); NULL or "": tuned */
  int channels;           /* force the channel count, as LOOM_NCHANNELS; 0: tuned */
  size_t chunkBytes;      /* force the chunk size, as LOOM_CHUNK_BYTES; 0: tuned */
} loomModelRequest_t;

#define LOOM_MODEL_REQUEST_INITIALIZER { loomModelAllReduce, 0, 4, NULL, 0, 1, 0, NULL, 0, 0 }

typedef struct {
  double timeUs;       /* predicted microseconds from the call to the last rank's completion */
  char algorithm[16];  /* "ring", "tree", ..., or "none" (one rank, no data) */
  int channels;
  size_t chunkBytes;
  size_t count;        /* elements per rank as the API counts them (0: less than one per rank) */
  size_t bytes;        /* the request's size in whole elements (of every rank's block where it counts them) */
  double algbwGbs;     /* nccl-tests' algorithm and bus bandwidth, GB/s = 1e9 bytes/s */
  double busbwGbs;
  char note[160];      /* why a forced choice was not honoured; empty when it was */
} loomModelPrediction_t;

/* The machine a group is timed on: per rank and direction inside a node, per NIC between nodes. */
typedef struct {
  int nranks;
  int ranksPerNode;
  double intraGbs;
  double latencyUs;      /* one message between ranks of a node */
  int nicsPerNode;
  double nicGbs;
  double netLatencyUs;   /* one message between nodes */
  double stepUs;         /* a rank's time per plan step */
  double launchUs;       /* once per operation: a kernel launch and its start on the GPU */
  double copyGbs;
  int fifoSlots;
  int maxChannels;
  int device;            /* nonzero: device memory */
  size_t slotBytes;      /* the transports' largest message */
} loomModelMachine_t;

LOOM_API loomResult_t loomModelCreate(const loomModelConfig_t* config, loomModel_t* model);
LOOM_API loomResult_t loomModelDestroy(loomModel_t model);

/* The job's shape as the model resolved it, and where its topology came from ("none", "live", a file). */
LOOM_API loomResult_t loomModelWorld(loomModel_t model, int* world, int* ranksPerNode);
LOOM_API const char* loomModelSource(loomModel_t model);

LOOM_API loomResult_t loomModelPredict(loomModel_t model, const loomModelRequest_t* request,
                                       loomModelPrediction_t* prediction);

/* Microseconds until every pair's message arrived: srcs[i] sends `bytes` to dsts[i], all at once,
   over the whole job (concurrent: as every group of the job's shape does at the same time). */
LOOM_API loomResult_t loomModelPointToPoint(loomModel_t model, size_t bytes, const int* srcs, const int* dsts,
                                            int npairs, int elemBytes, int concurrent, double* timeUs);

/* The machine the group `ranks` (NULL: the whole job) is timed on. */
LOOM_API loomResult_t loomModelGetMachine(loomModel_t model, const int* ranks, int nranks, int concurrent,
                                          loomModelMachine_t* machine);

/* The part of init that grows with the job: the bootstrap (each host's ranks join a leader, the
   rendezvous takes every record, the table goes down a tree of leaders) and two setup exchanges (an
   allGather of gatherBytes per rank, a barrier), as perf/bootstrap_scale runs them. Predicted from the
   protocol with constants a host measured (`bootstrap-scale --constants` prints them in the syntax of
   `constants`), not from a loomModel_t: it needs no topology. */
typedef struct {
  int ranks;
  int ranksPerNode;         /* ranks per host, at least 1 */
  double netLatencyUs;      /* one message between hosts */
  double netGbs;            /* TCP between two hosts, GB/s */
  size_t gatherBytes;       /* the allGather's part per rank; 0: the barrier only */
  int ranksPerProcess;      /* rank threads per process (they decode the table once); 0 or 1: a process each */
  const char* constants;    /* "join_us=40,record_us=0.3,..." over the defaults; NULL or "": the defaults */
} loomModelInitRequest_t;

#define LOOM_MODEL_INIT_REQUEST_INITIALIZER { 1, 8, 5.0, 10.0, 8, 1, NULL }

typedef struct {
  int hosts;
  int depth;                    /* hops of the tree of leaders below host 0's leader */
  size_t tableBytes;            /* the encoded table */
  double tableUs;               /* on a cluster (each host its own cores): until every rank has the table */
  double gatherUs;              /* then the allGather */
  double barrierUs;             /* then the barrier */
  double totalUs;               /* their sum */
  double busiestBytes;          /* the party (a rank, or the rendezvous) that moves the most bytes, both ways */
  char busiestBytesParty[48];
  int busiestSockets;           /* the party that holds the most sockets at once */
  char busiestSocketsParty[48];
  double cpuUs;                 /* every party's CPU, summed: one machine of C cores playing the job takes cpuUs / C */
} loomModelInitPrediction_t;

LOOM_API loomResult_t loomModelPredictInit(const loomModelInitRequest_t* request, loomModelInitPrediction_t* prediction);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_MODEL_H_ */
