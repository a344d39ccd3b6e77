#include "transport/net/ib/ib_config.h"

#include "base/env.h"

namespace loom::net::ib {

namespace {

Status readInRange(const char* name, int64_t fallback, int64_t low, int64_t high, int* out) {
  const int64_t v = envInt(name, fallback);
  if (v < low || v > high) return invalidArgument("{}={} is out of range ({}..{})", name, v, low, high);
  *out = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace

Status readIbConfig(IbConfig* out) {
  IbConfig c;
  c.hcaSpec = envString("LOOM_IB_HCA", "");
  LOOM_TRY(parseHcaFilter(c.hcaSpec, &c.hca));
  LOOM_TRY(readInRange("LOOM_IB_GID_INDEX", -1, -1, 65535, &c.gidIndex));
  LOOM_TRY(readInRange("LOOM_IB_QPS_PER_CONNECTION", 1, 1, kMaxQpsPerConnection, &c.qpsPerConnection));
  LOOM_TRY(readInRange("LOOM_IB_TIMEOUT", 20, 0, 31, &c.timeout));
  LOOM_TRY(readInRange("LOOM_IB_RETRY_CNT", 7, 0, 7, &c.retryCount));
  LOOM_TRY(readInRange("LOOM_IB_TC", 0, 0, 255, &c.trafficClass));
  LOOM_TRY(readInRange("LOOM_IB_SL", 0, 0, 15, &c.serviceLevel));
  int flag = 0;
  LOOM_TRY(readInRange("LOOM_DMABUF_ENABLE", 1, 0, 1, &flag));
  c.dmabufEnable = flag != 0;
  LOOM_TRY(readInRange("LOOM_GDR_FLUSH_DISABLE", 0, 0, 1, &flag));
  c.gdrFlushDisable = flag != 0;
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace loom::net::ib
