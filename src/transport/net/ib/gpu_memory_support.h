// Whether an RDMA device can take GPU memory, the two ways NCCL knows (its gdr.cc):
//
// - nvidia-peermem (or the older nv_peer_mem): a kernel module through which ibv_reg_mr accepts a CUDA
//   device pointer. Loaded, it registers itself under /sys/kernel/mm/memory_peers or shows in
//   /sys/module; lsmod alone is not enough (a module that failed to register is listed too).
// - dmabuf: the GPU driver exports a range of device memory as a dmabuf fd and ibv_reg_dmabuf_mr
//   registers it (kernel 5.12+, rdma-core 34+, a NIC driver that implements it). Probed as NCCL does:
//   ibv_reg_dmabuf_mr with fd -1 answers EBADF where the call is implemented, EOPNOTSUPP or
//   EPROTONOSUPPORT where it is not.
//
// The CUDA side (the driver can export dmabufs, device/dmabuf_export.h) and the GPU-NIC distance
// (net/gdr_choice.h) are decided elsewhere; this is only the NIC and kernel side.
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "transport/net/ib/verbs_api.h"

namespace loom::net::ib {

struct GpuMemorySupport {
  bool peermem = false;  // ibv_reg_mr takes CUDA pointers
  bool dmabuf = false;   // ibv_reg_dmabuf_mr works on this device
  std::string why;       // what was found, for LOOM_DEBUG=INFO
};

// `sysRoot` is "/" on a machine; tests point it at a directory of their own.
bool peermemLoaded(const std::string& sysRoot, std::string* which);

// Both probes for one opened device. `dmabufEnabled` false (LOOM_DMABUF_ENABLE=0) skips the dmabuf probe.
GpuMemorySupport probeGpuMemorySupport(const VerbsApi& api, ibv_pd* pd, bool dmabufEnabled,
                                       const std::string& sysRoot = "/");

}  // namespace loom::net::ib
