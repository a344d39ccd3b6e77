// FakeCuda's stream capture and graphs (fake_device.h's Graph): a capturing stream records its work as
// nodes instead of running it; a launched graph runs them in order on the launch's stream. A graph
// with memory nodes waits for every graph with memory nodes launched before it, which CUDA allows
// ("CUDA may also introduce synchronization between future graph launches", graph memory nodes).
#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "fake_counters.h"
#include "fake_device.h"

struct CUgraph_st {
  fakecuda::GraphRef graph;
};
struct CUgraphExec_st {
  fakecuda::GraphRef graph;
};
struct CUgraphNode_st {
  fakecuda::NodeKind kind;
};

namespace fakecuda {
namespace {

std::atomic<unsigned long long> nextCaptureId{1};

// The Done of every launch of a graph with memory nodes, oldest first (what the next one waits for).
struct MemoryGraphLaunches {
  std::mutex mutex;
  std::vector<DoneRef> launched;
};
MemoryGraphLaunches& memoryGraphLaunches() {
  static auto* m = new MemoryGraphLaunches;
  return *m;
}

cudaGraphNodeType nodeType(NodeKind kind) {
  switch (kind) {
    case NodeKind::Kernel: return cudaGraphNodeTypeKernel;
    case NodeKind::Memcpy: return cudaGraphNodeTypeMemcpy;
    case NodeKind::Memset: return cudaGraphNodeTypeMemset;
    case NodeKind::MemAlloc: return cudaGraphNodeTypeMemAlloc;
    case NodeKind::MemFree: return cudaGraphNodeTypeMemFree;
    case NodeKind::Host: return cudaGraphNodeTypeHost;
    case NodeKind::Empty: break;
  }
  return cudaGraphNodeTypeEmpty;
}

// One handle per node kind, for cudaGraphGetNodes (a node is known by its kind alone here).
CUgraphNode_st* nodeHandle(NodeKind kind) {
  static CUgraphNode_st handles[] = {{NodeKind::Kernel}, {NodeKind::Memcpy}, {NodeKind::Memset}, {NodeKind::MemAlloc},
                                     {NodeKind::MemFree}, {NodeKind::Empty}, {NodeKind::Host}};
  return &handles[static_cast<int>(kind)];
}

}  // namespace

Graph::~Graph() {
  for (void* p : owned) releaseGraphMemory(p);
}

bool Graph::hasMemoryNodes() const {
  for (const Node& n : nodes)
    if (n.kind == NodeKind::MemAlloc || n.kind == NodeKind::MemFree) return true;
  return false;
}

}  // namespace fakecuda

using namespace fakecuda;

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  FAKECUDA_ENTRY();
  std::shared_ptr<Stream> s = streamOf(stream);
  if (!s || s->legacy()) return fail(cudaErrorInvalidResourceHandle);  // the legacy stream cannot be captured
  if (s->capture()) return fail(cudaErrorIllegalState);
  auto graph = std::make_shared<Graph>();
  graph->id = nextCaptureId++;
  s->setCapture(graph);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  FAKECUDA_ENTRY();
  std::shared_ptr<Stream> s = streamOf(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  GraphRef g = s->capture();
  if (!g) return fail(cudaErrorIllegalState);
  endCapture(g);
  *graph = new CUgraph_st{g};
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status, unsigned long long* id,
                                     cudaGraph_t*, const cudaGraphNode_t**, const cudaGraphEdgeData**, size_t*) {
  FAKECUDA_ENTRY();
  std::shared_ptr<Stream> s = streamOf(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  GraphRef g = s->capture();
  *status = g ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  if (id) *id = g ? g->id : 0;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  FAKECUDA_ENTRY();
  return cudaStreamGetCaptureInfo(stream, status, nullptr, nullptr, nullptr, nullptr, nullptr);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode*) {
  FAKECUDA_ENTRY();
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  FAKECUDA_ENTRY();
  if (!graph) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->graph};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  FAKECUDA_ENTRY();
  if (!exec) return fail(cudaErrorInvalidValue);
  GraphRef g = exec->graph;
  std::vector<DoneRef> after;
  const bool memory = g->hasMemoryNodes();
  if (memory) {
    MemoryGraphLaunches& m = memoryGraphLaunches();
    std::lock_guard<std::mutex> lock(m.mutex);
    after = m.launched;
  }
  DoneRef done = enqueue(
      stream,
      [g] {
        for (const Graph::Node& n : g->nodes)
          if (n.run) n.run();
      },
      std::move(after));
  if (!done) return fail(cudaErrorInvalidResourceHandle);
  if (memory) {
    MemoryGraphLaunches& m = memoryGraphLaunches();
    std::lock_guard<std::mutex> lock(m.mutex);
    m.launched.push_back(done);
  }
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  FAKECUDA_ENTRY();
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  FAKECUDA_ENTRY();
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* numNodes) {
  FAKECUDA_ENTRY();
  if (!graph || !numNodes) return fail(cudaErrorInvalidValue);
  const std::vector<Graph::Node>& all = graph->graph->nodes;
  if (nodes)
    for (size_t i = 0; i < all.size() && i < *numNodes; ++i) nodes[i] = nodeHandle(all[i].kind);
  *numNodes = all.size();
  return cudaSuccess;
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type) {
  FAKECUDA_ENTRY();
  if (!node) return fail(cudaErrorInvalidValue);
  *type = nodeType(node->kind);
  return cudaSuccess;
}
