// FakeVerbs' control API (fake_control.h) and ibv_wc_status_str with libibverbs' words.
#include <cstring>

#include "fake_control.h"
#include "fake_verbs.h"

using namespace fakeverbs;

extern "C" {

int fake_verbs_inject(const char* fault, int count) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  if (std::strcmp(fault, "retry_exceeded") == 0) f.faults.retryExceeded = count;
  else if (std::strcmp(fault, "rnr_exceeded") == 0) f.faults.rnrExceeded = count;
  else if (std::strcmp(fault, "reg_mr_enomem") == 0) f.faults.regMrNoMemory = count;
  else if (std::strcmp(fault, "modify_qp_einval") == 0) f.faults.modifyToRtrInvalid = count;
  else if (std::strcmp(fault, "reg_dmabuf_eopnotsupp") == 0) f.faults.dmabufUnsupported = count;
  else return -1;
  return 0;
}

void fake_verbs_reset(void) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  f.faults = Faults{};
}

long fake_verbs_live_objects(void) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  return f.live;
}

const char* ibv_wc_status_str(ibv_wc_status status) {
  static const char* const words[] = {
      "success", "local length error", "local QP operation error", "local EE context operation error",
      "local protection error", "Work Request Flushed Error", "memory management operation error",
      "bad response error", "local access error", "remote invalid request error", "remote access error",
      "remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
      "local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
      "invalid EE context state", "fatal error", "response timeout error", "general error"};
  const auto i = static_cast<size_t>(status);
  return i < sizeof words / sizeof words[0] ? words[i] : "unknown";
}

}  // extern "C"
