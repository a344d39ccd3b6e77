// GPUDirect RDMA, per rank: whether its NIC may read and write its GPU's memory directly, and how the
// memory is registered. NCCL's rule (ncclTopoCheckGdr): only when the PCIe path from the GPU to the
// NIC is no farther than a level, PXB by default (both under PCIe switches, not through a CPU, whose
// host bridge makes peer-to-peer reads slow or impossible), set by LOOM_NET_GDR_LEVEL with NCCL's
// names (LOC: never, PIX, PXB, PHB, SYS: always) or numbers (0..5, 5 as SYS). Then dmabuf when both
// the NIC and the CUDA driver offer it, else nvidia-peermem when the NIC takes CUDA pointers; else
// device buffers reach the network staged through host memory.
//
// Pure: decided from what the topology, the provider and the device layer said, so that it is tested
// without a GPU or a NIC.
#pragma once

#include <string>

#include "base/status.h"
#include "topology/graph.h"

namespace loom::net {

enum class GdrMode { Staged, Dmabuf, Peermem };
const char* gdrModeName(GdrMode mode);

struct GdrFacts {
  std::string nic;          // the provider's device name, for the reason
  int gpuNicPath = -1;      // PathType from the rank's GPU to the NIC; -1: unknown (no path in the topology)
  int ptrSupport = 0;       // the NIC's DeviceProperties::ptrSupport
  bool cudaDmabuf = false;  // the CUDA driver exports this GPU's memory as dmabufs
  std::string cudaDmabufWhy;  // why not, when it does not
};

struct GdrLevel {
  PathType farthest = PathType::Pxb;  // GDR when the path is no farther than this
  bool never = false;                 // LOC
  bool set = false;                   // from LOOM_NET_GDR_LEVEL
};

// LOOM_NET_GDR_LEVEL; an unknown value is an error naming the accepted ones.
Status gdrLevelFromEnvironment(GdrLevel* out);
Status parseGdrLevel(const std::string& text, GdrLevel* out);

struct GdrChoice {
  GdrMode mode = GdrMode::Staged;
  std::string why;
};
GdrChoice chooseGdr(const GdrFacts& facts, const GdrLevel& level);

}  // namespace loom::net
