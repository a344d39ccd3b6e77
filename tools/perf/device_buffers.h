// -G/--device cuda: the collective runs on CUDA device buffers (cudaMalloc, device rank % GPUs) on a
// stream of this rank's own, as nccl-tests does: the timed loop enqueues, then synchronizes the
// stream. The host buffers stay the place where inputs are made and outputs checked; this class
// mirrors them on the device: upload before the timed loop and before each check, download after
// each check (both after the stream finished).
// Without -G every method is the identity / a no-op. A build without CUDA refuses -G at parse time.
#pragma once

#include <cstddef>

#include "check.h"

namespace loomperf {

class DeviceBuffers {
 public:
  // Allocates two device buffers of `bytes` when `enabled`; throws std::runtime_error naming the
  // reason when there is no usable CUDA device.
  DeviceBuffers(bool enabled, size_t bytes, int rank, const unsigned char* hostSend, const unsigned char* hostRecv);
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  bool enabled() const { return enabled_; }
  int device() const { return device_; }
  // The device view of a host view (same offsets from the bases), or the host view itself.
  BufferView map(const BufferView& host) const;
  // Copies the host view's send and receive regions to the device (in place, the send region lies
  // inside the receive region).
  void upload(const BufferView& host, size_t elemSize) const;
  // Copies the receive region back to the host view.
  void download(const BufferView& host, size_t elemSize) const;
  // The stream the collectives run on (nullptr without -G), and waiting for it.
  void* stream() const { return stream_; }
  void synchronize() const;
  // -G N: what `enqueue` puts on the stream captured into a CUDA graph (the calling thread's capture
  // only: rank threads capture side by side); once it is instantiated `ready()`, then that graph
  // launched `launches` times and waited for. The graph is destroyed before this returns, also when
  // something throws.
  template <class Enqueue, class Ready>
  void replayCaptured(int launches, Enqueue enqueue, Ready ready);

  // "host memory" or "cuda:N device memory" for the report's rank lines.
  const char* describe() const;

 private:
  bool enabled_;
  size_t bytes_;
  int device_ = -1;
  const unsigned char* hostSend_;
  const unsigned char* hostRecv_;
  unsigned char* send_ = nullptr;
  unsigned char* recv_ = nullptr;
  void* stream_ = nullptr;
  char description_[48] = "host memory";
};

// Whether this build can run -G cuda.
bool cudaBuild();

// replayCaptured's CUDA calls (device_buffers.cc): capture begun on `stream`, ended into an
// instantiated graph (an opaque handle), launched, destroyed.
void beginGraphCapture(void* stream);
void* endGraphCapture(void* stream);  // the executable graph; throws when the capture broke
void launchGraph(void* exec, void* stream);
void destroyGraph(void* exec);

template <class Enqueue, class Ready>
void DeviceBuffers::replayCaptured(int launches, Enqueue enqueue, Ready ready) {
  beginGraphCapture(stream_);
  void* exec = nullptr;
  try {
    enqueue();
  } catch (...) {
    try {
      destroyGraph(endGraphCapture(stream_));
    } catch (...) {  // the capture broke too: the first error is the one to report
    }
    throw;
  }
  exec = endGraphCapture(stream_);
  try {
    ready();
    for (int i = 0; i < launches; ++i) launchGraph(exec, stream_);
    synchronize();
  } catch (...) {
    destroyGraph(exec);
    throw;
  }
  destroyGraph(exec);
}

}  // namespace loomperf
