// FakeCuda, a test double of the CUDA runtime (README.md): the execution model behind it. Device
// memory is host memory; each stream is a host thread that runs its work in order; kernels are host
// threads, one per thread block, all running at once as resident blocks do. What the CUDA
// Programming Guide says synchronizes is modelled so that Loom's hazards show up here as they would
// on a GPU: work on the legacy default stream waits for (and holds back) the blocking streams of its
// device, and allocating or freeing device or pinned memory waits for every stream of the device.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace fakecuda {

struct Graph;

// Set once a piece of stream work ran (events and dependencies point at these). Work recorded into a
// graph being captured instead has a Done that names the capture (cudaStreamWaitEvent joins it).
class Done {
 public:
  Done() = default;
  explicit Done(std::shared_ptr<Graph> capture) : capture_(std::move(capture)) {}
  void set();
  void wait();
  bool isSet();
  std::chrono::steady_clock::time_point when();  // when it was set (cudaEventElapsedTime)
  std::shared_ptr<Graph> capture() const { return capture_.lock(); }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool set_ = false;
  std::chrono::steady_clock::time_point when_{};
  std::weak_ptr<Graph> capture_;
};
using DoneRef = std::shared_ptr<Done>;

// What a node of a captured graph is (cudaGraphNodeGetType).
enum class NodeKind { Kernel, Memcpy, Memset, MemAlloc, MemFree, Empty, Host };

// A graph captured from streams (cudaStreamBeginCapture .. cudaStreamEndCapture): its nodes in the
// order they were captured, which a launch runs in that order on the launch's stream (streams that
// joined the capture are folded into the one order: less concurrency than a GPU, the same results).
// Memory that stream-ordered allocations made while capturing belongs to the graph (graph memory
// nodes) and goes with it; CUDA may order launches of graphs with memory nodes after each other, and
// FakeCuda does (graphs.cc), so that a design that relies on them running at once deadlocks here too.
struct Graph {
  ~Graph();
  struct Node {
    NodeKind kind;
    std::function<void()> run;
  };
  std::mutex mutex;
  std::vector<Node> nodes;
  std::vector<void*> owned;  // memory of its allocation nodes
  unsigned long long id = 0;
  bool hasMemoryNodes() const;
};
using GraphRef = std::shared_ptr<Graph>;

// One stream: its work runs on a thread of its own, in order, each piece after its dependencies.
class Stream : public std::enable_shared_from_this<Stream> {
 public:
  Stream(int device, bool blocking, bool legacy) : device_(device), blocking_(blocking), legacy_(legacy) {}
  ~Stream();
  int device() const { return device_; }
  bool blocking() const { return blocking_; }
  bool legacy() const { return legacy_; }
  // Appends work (after `after` and everything before it on this stream); returns its Done.
  DoneRef enqueue(std::function<void()> work, std::vector<DoneRef> after = {});
  // The capture this stream records into (null: none); set by cudaStreamBeginCapture, or when the
  // stream waits for an event recorded in a capture (it joins it), cleared when the capture ends.
  GraphRef capture();
  void setCapture(GraphRef graph);
  // The Done of the last work enqueued (set already when there was none).
  DoneRef last();
  // Lets the thread end once the queue is empty (cudaStreamDestroy).
  void retire();

 private:
  struct Work {
    std::function<void()> run;
    std::vector<DoneRef> after;
    DoneRef done;
  };
  void loop();
  int device_;
  bool blocking_;
  bool legacy_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Work> queue_;
  DoneRef last_;
  GraphRef capture_;
  bool retired_ = false;
  bool started_ = false;  // the stream's thread runs (detached; it holds the stream)
};

// The stream a cudaStream_t names (the legacy one for nullptr / cudaStreamLegacy, on the calling
// thread's current device); null for a handle that is no stream.
std::shared_ptr<Stream> streamOf(cudaStream_t handle);
cudaStream_t createStream(bool blocking);
void destroyStream(cudaStream_t handle);

// Enqueues `work` on the stream with the legacy-stream rules applied; null when the handle is bad. On a
// stream being captured, the work becomes a node of kind `kind` of the capture's graph instead.
DoneRef enqueue(cudaStream_t handle, std::function<void()> work, std::vector<DoneRef> after = {},
                NodeKind kind = NodeKind::Kernel);
// Every stream that records into `graph` stops (cudaStreamEndCapture).
void endCapture(const GraphRef& graph);
// Frees device memory a graph's allocation node made (when the graph goes).
void releaseGraphMemory(void* p);

// What an implicitly synchronizing call (cudaMalloc, cudaFree, cudaHostAlloc, ...) waits for: every
// stream's work on `device` enqueued so far. Counted (fake_counters.h).
void synchronizeDevice(int device);

int currentDevice();
void setCurrentDevice(int device);
int deviceCount();
// Thread blocks of the plan kernel the fake device holds resident at once (LOOM_FAKE_CUDA_BLOCKS).
unsigned residentBlocks();
// How long a plan kernel holds its stream after its blocks ended (LOOM_FAKE_CUDA_KERNEL_TAIL_MS, read at
// each launch, default 0): a launch still in flight once its exchanges are over, as a slow GPU's last
// copy leaves one, so that tests can have a peer leave while this rank's launch runs.
std::chrono::milliseconds planKernelTail();

// The calling thread's last error (cudaGetLastError), recorded by every failing call.
cudaError_t fail(cudaError_t error);
cudaError_t takeLastError();

}  // namespace fakecuda
