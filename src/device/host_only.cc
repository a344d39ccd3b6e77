// The device layer's seam (device_layer.h) in builds without CUDA: there is no device memory, so core
// routes every operation to the host path and reaches none of the calls below that would need a GPU.
// They still answer (with an error naming the build) rather than being left undefined.
#include "device/device_layer.h"

namespace loom::device {
namespace {

Status noCuda(const char* what) {
  return errorStatus(loomInvalidUsage, "{}: this Loom was built without CUDA", what);
}

}  // namespace

bool cudaUsable() { return false; }
int deviceCount() { return 0; }
double gpuCopyRateGbs(int) { return 0; }
const std::string& unusableReason() {
  static const std::string reason = "this Loom was built without CUDA";
  return reason;
}

Status allocateDeviceMemory(size_t, void** out) {
  *out = nullptr;
  return noCuda("device memory");
}
Status freeDeviceMemory(void*) { return noCuda("device memory"); }

Placement placementOf(const void*, size_t, const void*, size_t) { return Placement{}; }

Status checkDeviceList(int, const int*) {
  return invalidArgument("loomCommInitAll: device lists need a CUDA build with a GPU; pass NULL for host ranks");
}

int activeDevice() { return -1; }
std::string busIdOf(int) { return ""; }

bool dmabufExportable(int, std::string* why) {
  *why = "this Loom was built without CUDA";
  return false;
}
Status exportDmabuf(const void*, size_t, DmabufRange*) { return noCuda("dmabuf export"); }

Status readScalarInStreamOrder(const void**, loomDataType_t, void*, loomStream_t) { return Status::Ok(); }

Status captureOf(loomStream_t, StreamCapture* out) {
  *out = StreamCapture{};
  return Status::Ok();
}

std::unique_ptr<CommDevice> makeCommDevice(CommFacts) { return nullptr; }

Status setUpPlanKernels(std::span<const std::pair<CommDevice*, int>> pending) {
  return pending.empty() ? Status::Ok() : noCuda("plan kernels");
}

Status runStaged(std::span<StagedCall> calls, bool, const HostPart&) {
  return calls.empty() ? Status::Ok() : noCuda("staging device buffers");
}

}  // namespace loom::device
