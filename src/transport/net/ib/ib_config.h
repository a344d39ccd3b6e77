// The ib provider's settings, read when a provider is made (NCCL_IB_* names and defaults):
//   LOOM_IB_HCA                 which devices and ports (hca_filter.h)
//   LOOM_IB_GID_INDEX           the GID index on RoCE ports (default: chosen, gid_choice.h)
//   LOOM_IB_QPS_PER_CONNECTION  reliable-connection QPs per connection, messages round-robin (1..128, 1)
//   LOOM_IB_TIMEOUT             QP ack timeout, 4.096 us * 2^value (0..31, default 20: about 4 s; 0 infinite)
//   LOOM_IB_RETRY_CNT           retries before a transport error (0..7, default 7: about 30 s in all)
//   LOOM_IB_TC                  RoCE traffic class (0..255, default 0)
//   LOOM_IB_SL                  InfiniBand service level (0..15, default 0)
//   LOOM_DMABUF_ENABLE          register GPU memory as dmabuf where the NIC can (0..1, default 1)
//   LOOM_GDR_FLUSH_DISABLE      no flush read after a receive into GPU memory (0..1, default 0)
#pragma once

#include <string>

#include "base/status.h"
#include "transport/net/ib/hca_filter.h"

namespace loom::net::ib {

inline constexpr int kMaxQpsPerConnection = 128;  // NCCL_IB_MAX_QPS

struct IbConfig {
  HcaFilter hca;
  std::string hcaSpec;
  int gidIndex = -1;  // -1: chosen per port
  int qpsPerConnection = 1;
  int timeout = 20;
  int retryCount = 7;
  int trafficClass = 0;
  int serviceLevel = 0;
  bool dmabufEnable = true;
  bool gdrFlushDisable = false;
};

Status readIbConfig(IbConfig* out);

}  // namespace loom::net::ib
