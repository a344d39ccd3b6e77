#include "device_buffers.h"

#include <cstdio>
#include <stdexcept>
#include <string>

#ifdef LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace loomperf {

#ifdef LOOM_HAVE_CUDA
namespace {

void cudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("-G cuda: ") + what + ": " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

size_t offsetOf(const void* p, const unsigned char* base) {
  return static_cast<size_t>(static_cast<const unsigned char*>(p) - base);
}

}  // namespace

bool cudaBuild() { return true; }

DeviceBuffers::DeviceBuffers(bool enabled, size_t bytes, int rank, const unsigned char* hostSend,
                             const unsigned char* hostRecv)
    : enabled_(enabled), bytes_(bytes), hostSend_(hostSend), hostRecv_(hostRecv) {
  if (!enabled_) return;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    throw std::runtime_error(std::string("-G cuda: no usable CUDA device (cudaGetDeviceCount: ") +
                             (e != cudaSuccess ? cudaGetErrorName(e) : "0 devices") + ")");
  device_ = rank % count;
  cudaCheck(cudaSetDevice(device_), "cudaSetDevice");
  const size_t n = bytes < 64 ? 64 : bytes;
  cudaCheck(cudaMalloc(reinterpret_cast<void**>(&send_), n), "cudaMalloc");
  cudaCheck(cudaMalloc(reinterpret_cast<void**>(&recv_), n), "cudaMalloc");
  cudaStream_t stream = nullptr;
  cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = stream;
  std::snprintf(description_, sizeof description_, "cuda:%d device memory", device_);
}

DeviceBuffers::~DeviceBuffers() {
  if (stream_) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
  if (send_) cudaFree(send_);
  if (recv_) cudaFree(recv_);
}

BufferView DeviceBuffers::map(const BufferView& h) const {
  if (!enabled_) return h;
  // In place, the send pointer lies inside the host receive buffer.
  auto mapOne = [&](const void* p) -> void* {
    const auto* c = static_cast<const unsigned char*>(p);
    if (c >= hostRecv_ && c <= hostRecv_ + bytes_) return recv_ + offsetOf(p, hostRecv_);
    return send_ + offsetOf(p, hostSend_);
  };
  return BufferView{mapOne(h.send), h.sendCount, mapOne(h.recv), h.recvCount};
}

void DeviceBuffers::synchronize() const {
  if (stream_) cudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
}

void DeviceBuffers::upload(const BufferView& h, size_t elemSize) const {
  if (!enabled_) return;
  synchronize();  // the copies below use the legacy stream, which does not wait for ours
  const BufferView d = map(h);
  // Both views, also when they start at the same address: in place, rank 0's reduce_scatter input is
  // longer than its output there (the input last, since it may lie inside the output's range).
  cudaCheck(cudaMemcpy(d.recv, h.recv, h.recvCount * elemSize, cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
  cudaCheck(cudaMemcpy(d.send, h.send, h.sendCount * elemSize, cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
}

void DeviceBuffers::download(const BufferView& h, size_t elemSize) const {
  if (!enabled_) return;
  synchronize();
  const BufferView d = map(h);
  cudaCheck(cudaMemcpy(h.recv, d.recv, h.recvCount * elemSize, cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
}

void beginGraphCapture(void* stream) {
  cudaCheck(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal),
            "cudaStreamBeginCapture");
}

void* endGraphCapture(void* stream) {
  cudaGraph_t graph = nullptr;
  cudaCheck(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  cudaCheck(made, "cudaGraphInstantiate");
  return exec;
}

void launchGraph(void* exec, void* stream) {
  cudaCheck(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), static_cast<cudaStream_t>(stream)), "cudaGraphLaunch");
}

void destroyGraph(void* exec) {
  if (exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
}

#else  // !LOOM_HAVE_CUDA

bool cudaBuild() { return false; }

DeviceBuffers::DeviceBuffers(bool enabled, size_t, int, const unsigned char* hostSend, const unsigned char* hostRecv)
    : enabled_(enabled), bytes_(0), hostSend_(hostSend), hostRecv_(hostRecv) {
  if (enabled_) throw std::runtime_error("-G cuda: this loom-perf was built without CUDA");
}
DeviceBuffers::~DeviceBuffers() = default;
BufferView DeviceBuffers::map(const BufferView& h) const { return h; }
void DeviceBuffers::upload(const BufferView&, size_t) const {}
void DeviceBuffers::download(const BufferView&, size_t) const {}
void DeviceBuffers::synchronize() const {}
void beginGraphCapture(void*) { throw std::runtime_error("-G: this loom-perf was built without CUDA"); }
void* endGraphCapture(void*) { return nullptr; }
void launchGraph(void*, void*) {}
void destroyGraph(void*) {}

#endif

const char* DeviceBuffers::describe() const { return description_; }

}  // namespace loomperf
