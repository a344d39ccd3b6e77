// The seam's CommDevice in CUDA builds: one communicator's plan kernels (plan_kernels.h) and its
// stream-ordered staged operations in flight (staging.h), behind the interface core sees
// (device_layer.h). CUDA builds only.
#pragma once

#include "device/device_layer.h"
#include "device/plan_kernels.h"
#include "device/staging.h"

namespace loom::device {

class CudaCommDevice final : public CommDevice {
 public:
  explicit CudaCommDevice(CommFacts facts) : facts_(std::move(facts)), kernels_(facts_) {}

  PlanKernelSetup planKernelSetup() const override { return kernels_.setup(); }
  const std::string& planKernelRefusal() const override { return kernels_.refusal(); }
  bool planKernelsRequired() const override { return kernels_.required(); }
  int planKernelGpu() const override { return kernels_.gpu(); }
  DeviceFabric fabric() const override { return kernels_.fabric(); }
  Status adjustChannels(Algorithm algo, PlanRequest* req) override { return kernels_.adjustChannels(algo, req); }
  Status launch(std::vector<KernelPlan>& plans, std::span<const loomStream_t> streams) override {
    return kernels_.launch(plans, streams);
  }
  void raiseAbort() override { kernels_.raiseAbort(); }
  void poll() override { kernels_.poll(); }
  Status profile(bool reset, loomDeviceProfile_t* out) override { return kernels_.profile(reset, out); }
  DeviceProgress progress() override { return kernels_.progress(); }
  Status registerWindow(void* p, size_t bytes, uint32_t* slot) override { return kernels_.registerWindow(p, bytes, slot); }
  Status deregisterWindow(uint32_t slot) override { return kernels_.deregisterWindow(slot); }
  std::pair<void*, size_t> window(uint32_t slot) const override { return kernels_.window(slot); }
  bool inWindows(const void* send, size_t sendBytes, const void* recv, size_t recvBytes) const override {
    return kernels_.inWindows(send, sendBytes, recv, recvBytes);
  }

  PlanKernels& kernels() { return kernels_; }
  StreamStaging& streams() { return streams_; }

 private:
  CommFacts facts_;
  PlanKernels kernels_;  // refers to facts_
  StreamStaging streams_;
};

}  // namespace loom::device
