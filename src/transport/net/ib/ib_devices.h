// Device and port discovery: every port of every RDMA device that LOOM_IB_HCA lets through and that is
// ACTIVE becomes one provider device, described by its link layer (InfiniBand or Ethernet, i.e.
// RoCE), speed (lanes x lane rate), active MTU and, on RoCE, the GID chosen for it. A device is opened
// once (one context and protection domain, shared by its ports and comms, with its registration
// cache).
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/net/ib/gid_choice.h"
#include "transport/net/ib/gpu_memory_support.h"
#include "transport/net/ib/ib_config.h"
#include "transport/net/ib/memory_registry.h"
#include "transport/net/ib/verbs_api.h"
#include "transport/net/provider.h"

namespace loom::net::ib {

// One opened device; comms hold it (and so the library's context) until they are gone.
class IbDevice {
 public:
  static Status open(std::shared_ptr<const VerbsApi> api, ibv_device* device, std::shared_ptr<IbDevice>* out);
  ~IbDevice();
  IbDevice(const IbDevice&) = delete;
  IbDevice& operator=(const IbDevice&) = delete;

  const VerbsApi& api() const { return *api_; }
  const std::shared_ptr<const VerbsApi>& apiPointer() const { return api_; }
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const std::string& name() const { return name_; }
  const ibv_device_attr& attributes() const { return attributes_; }
  MemoryRegistry& registry() { return *registry_; }
  // What the device takes of GPU memory (probed once, when discovery opens it).
  const GpuMemorySupport& gpuMemory() const { return gpuMemory_; }
  void setGpuMemory(GpuMemorySupport s) { gpuMemory_ = std::move(s); }

 private:
  IbDevice() = default;
  std::shared_ptr<const VerbsApi> api_;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::string name_;
  ibv_device_attr attributes_{};
  std::unique_ptr<MemoryRegistry> registry_;
  GpuMemorySupport gpuMemory_;
};

struct IbPort {
  std::shared_ptr<IbDevice> device;
  int port = 1;
  bool ethernet = false;  // RoCE; else InfiniBand
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  GidEntry gid;
  DeviceProperties props;
};

// The usable ports, in device order. `report` lists every port seen and why one was left out, for
// the error a user sees when none is usable. A port's ptrSupport has kCudaPointers with
// nvidia-peermem and kDmabufPointers when its device registers dmabufs (gpu_memory_support.h).
Status discoverPorts(std::shared_ptr<const VerbsApi> api, const IbConfig& config, std::vector<IbPort>* ports,
                     std::string* report);

int mtuBytes(ibv_mtu mtu);

}  // namespace loom::net::ib
