// FakeCuda's streams, legacy-stream rules and implicit synchronization (fake_device.h).
#include "fake_device.h"

#include "fake_counters.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

// The runtime's opaque stream type, defined by the test double: a handle owns its stream.
struct CUstream_st {
  std::shared_ptr<fakecuda::Stream> stream;
};

namespace fakecuda {
namespace {

constexpr int kMostDevices = 16;

struct Registry {
  std::mutex mutex;
  std::vector<std::weak_ptr<Stream>> streams;  // every created stream, for device synchronization
  std::shared_ptr<Stream> legacy[kMostDevices];
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: stream threads may outlive static destruction
  return *r;
}

thread_local int tlsDevice = 0;
thread_local cudaError_t tlsLastError = cudaSuccess;

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::shared_ptr<Stream> legacyStream(int device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.legacy[device]) r.legacy[device] = std::make_shared<Stream>(device, true, true);
  return r.legacy[device];
}

DoneRef alreadyDone() {
  auto d = std::make_shared<Done>();
  d->set();
  return d;
}

}  // namespace

void Done::set() {
  std::lock_guard<std::mutex> lock(mutex_);
  set_ = true;
  when_ = std::chrono::steady_clock::now();
  changed_.notify_all();
}

std::chrono::steady_clock::time_point Done::when() {
  std::lock_guard<std::mutex> lock(mutex_);
  return when_;
}

void Done::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return set_; });
}

bool Done::isSet() {
  std::lock_guard<std::mutex> lock(mutex_);
  return set_;
}

Stream::~Stream() = default;

DoneRef Stream::enqueue(std::function<void()> work, std::vector<DoneRef> after) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!started_) {
    // The thread keeps its stream alive; it ends once the stream is retired and drained.
    std::thread([self = shared_from_this()] { self->loop(); }).detach();
    started_ = true;
  }
  auto done = std::make_shared<Done>();
  queue_.push_back(Work{std::move(work), std::move(after), done});
  last_ = done;
  changed_.notify_all();
  return done;
}

GraphRef Stream::capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_;
}

void Stream::setCapture(GraphRef graph) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = std::move(graph);
}

DoneRef Stream::last() {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_ ? last_ : alreadyDone();
}

void Stream::retire() {
  std::lock_guard<std::mutex> lock(mutex_);
  retired_ = true;
  changed_.notify_all();
}

void Stream::loop() {
  for (;;) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return !queue_.empty() || retired_; });
      if (queue_.empty()) return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    for (const DoneRef& d : work.after) d->wait();
    if (work.run) work.run();
    work.done->set();
  }
}

std::shared_ptr<Stream> streamOf(cudaStream_t handle) {
  if (handle == nullptr || handle == cudaStreamLegacy) return legacyStream(currentDevice());
  if (handle == cudaStreamPerThread) return nullptr;  // not modelled: Loom does not use it
  return handle->stream;
}

cudaStream_t createStream(bool blocking) {
  auto* handle = new CUstream_st{std::make_shared<Stream>(currentDevice(), blocking, false)};
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.streams.push_back(handle->stream);
  return handle;
}

void destroyStream(cudaStream_t handle) {
  handle->stream->retire();
  delete handle;
}

DoneRef enqueue(cudaStream_t handle, std::function<void()> work, std::vector<DoneRef> after, NodeKind kind) {
  std::shared_ptr<Stream> s = streamOf(handle);
  if (!s) return nullptr;
  if (GraphRef graph = s->capture()) {
    // Recorded, not run: dependencies inside a capture are its order (Graph says so).
    std::lock_guard<std::mutex> lock(graph->mutex);
    graph->nodes.push_back({work ? kind : NodeKind::Empty, std::move(work)});
    auto done = std::make_shared<Done>(graph);
    done->set();
    return done;
  }
  // The legacy stream waits for every blocking stream of its device, and they wait for it.
  if (s->legacy()) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto& weak : r.streams)
      if (auto other = weak.lock(); other && other->device() == s->device() && other->blocking())
        after.push_back(other->last());
  } else if (s->blocking()) {
    after.push_back(legacyStream(s->device())->last());
  }
  return s->enqueue(std::move(work), std::move(after));
}

void endCapture(const GraphRef& graph) {
  Registry& r = registry();
  std::vector<std::shared_ptr<Stream>> all;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto& weak : r.streams)
      if (auto s = weak.lock()) all.push_back(s);
  }
  for (auto& s : all)
    if (s->capture() == graph) s->setCapture(nullptr);
}

void synchronizeDevice(int device) {
  countDeviceSynchronization();
  std::vector<DoneRef> pending;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto it = r.streams.begin(); it != r.streams.end();) {
      if (auto s = it->lock()) {
        if (s->device() == device) pending.push_back(s->last());
        ++it;
      } else {
        it = r.streams.erase(it);
      }
    }
    if (r.legacy[device]) pending.push_back(r.legacy[device]->last());
  }
  for (const DoneRef& d : pending) d->wait();
}

int currentDevice() { return tlsDevice; }
void setCurrentDevice(int device) { tlsDevice = device; }
int deviceCount() { return std::max(1, std::min(kMostDevices, envInt("LOOM_FAKE_CUDA_DEVICES", 1))); }
unsigned residentBlocks() { return static_cast<unsigned>(std::max(1, envInt("LOOM_FAKE_CUDA_BLOCKS", 64))); }
std::chrono::milliseconds planKernelTail() {
  return std::chrono::milliseconds(std::max(0, envInt("LOOM_FAKE_CUDA_KERNEL_TAIL_MS", 0)));
}

cudaError_t fail(cudaError_t error) {
  if (error != cudaSuccess) tlsLastError = error;
  return error;
}

cudaError_t takeLastError() {
  const cudaError_t e = tlsLastError;
  tlsLastError = cudaSuccess;
  return e;
}

}  // namespace fakecuda
