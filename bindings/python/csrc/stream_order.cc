#include "stream_order.h"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace loomtorch {

namespace {
c10::impl::VirtualGuardImpl cudaImpl() { return c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA); }
}  // namespace

CallStream::CallStream(c10::Device device) {
  if (!device.is_cuda()) return;
  guard_.reset_device(device);
  stream_ = cudaImpl().getStream(device);
  // Loom's stream type has cudaStream_t's layout; torch's default stream is the legacy one (NULL),
  // on which Loom runs the call synchronously.
  loom_ = static_cast<loomStream_t>(stream_->native_handle());
}

void StreamMark::blockCurrentStream() const { event_.block(cudaImpl().getStream(stream_.device())); }

c10::Stream poolStream(c10::Device device) { return cudaImpl().getStreamFromGlobalPool(device); }

}  // namespace loomtorch
