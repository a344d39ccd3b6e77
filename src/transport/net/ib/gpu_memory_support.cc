#include "transport/net/ib/gpu_memory_support.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/status.h"

namespace loom::net::ib {

bool peermemLoaded(const std::string& sysRoot, std::string* which) {
  static const char* const kMarks[] = {"sys/kernel/mm/memory_peers/nv_mem/version",
                                       "sys/kernel/mm/memory_peers/nv_mem_nc/version",
                                       "sys/module/nvidia_peermem/version"};
  const std::string root = sysRoot.empty() || sysRoot.back() == '/' ? sysRoot : sysRoot + "/";
  for (const char* mark : kMarks) {
    if (access((root + mark).c_str(), F_OK) == 0) {
      *which = std::string("/") + mark;
      return true;
    }
  }
  return false;
}

GpuMemorySupport probeGpuMemorySupport(const VerbsApi& api, ibv_pd* pd, bool dmabufEnabled,
                                       const std::string& sysRoot) {
  GpuMemorySupport s;
  std::string mark;
  s.peermem = peermemLoaded(sysRoot, &mark);
  std::string peermem = s.peermem ? "nvidia-peermem loaded (" + mark + ")" : "no nvidia-peermem";
  std::string dmabuf;
  if (!dmabufEnabled) {
    dmabuf = "dmabuf off (LOOM_DMABUF_ENABLE=0)";
  } else if (!api.regDmabufMr) {
    dmabuf = "no dmabuf: " + api.path + " has no ibv_reg_dmabuf_mr (rdma-core 34 or newer has it)";
  } else {
    errno = 0;
    ibv_mr* mr = api.regDmabufMr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
    const int err = errno;
    if (mr) {  // a library that took fd -1: nothing to learn from it
      api.deregMr(mr);
      dmabuf = "no dmabuf: ibv_reg_dmabuf_mr accepted fd -1";
    } else if (err == EBADF) {
      s.dmabuf = true;
      dmabuf = "dmabuf registration supported";
    } else {
      dmabuf = fmt::format("no dmabuf: ibv_reg_dmabuf_mr probe answered {}{}", std::strerror(err),
                           err == EOPNOTSUPP || err == EPROTONOSUPPORT ? " (the kernel or the NIC's driver lacks it)" : "");
    }
  }
  s.why = peermem + ", " + dmabuf;
  return s;
}

}  // namespace loom::net::ib
