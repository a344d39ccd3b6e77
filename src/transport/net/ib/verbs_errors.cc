#include "transport/net/ib/verbs_errors.h"

#include <cerrno>
#include <cstring>

namespace loom::net::ib {

const char* completionHint(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_RETRY_EXC_ERR:
      return "the NICs cannot reach each other or the GID index is wrong (LOOM_IB_GID_INDEX); check the path "
             "between the hosts (RoCE: routing, VLAN, switch filtering) and that the peer is alive; only on a "
             "large or congested fabric raise LOOM_IB_TIMEOUT";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "the peer had no receive posted (receiver not ready, RNR) for longer than its retries: it stopped "
             "receiving or failed";
    case IBV_WC_REM_ACCESS_ERR:
      return "the peer refused the access: its buffer was released or is smaller than the write (did it close "
             "the connection or fail?)";
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
      return "the peer's QP refused the operation (its QP failed, or the two sides disagree on the protocol)";
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
      return "a local buffer was not registered for the transfer (a bug in Loom's ib provider)";
    case IBV_WC_WR_FLUSH_ERR:
      return "the QP had failed before (an earlier error on this connection)";
    case IBV_WC_FATAL_ERR:
    case IBV_WC_GENERAL_ERR:
      return "the device failed (check dmesg and the port's state with ibv_devinfo)";
    default:
      return "";
  }
}

Status completionError(const VerbsApi& api, const ibv_wc& wc, const std::string& what, const std::string& peer) {
  const char* words = api.wcStatusStr(wc.status);
  const char* hint = completionHint(wc.status);
  return errorStatus(loomRemoteError, "ib: {} with {} failed: {} (status {}, vendor error {:#x}){}{}", what, peer,
                     words ? words : "unknown status", static_cast<int>(wc.status), wc.vendor_err,
                     *hint ? ": " : "", hint);
}

Status modifyQpError(int err, const char* state, const std::string& details) {
  std::string hint;
  if (err == EINVAL && std::strcmp(state, "RTR") == 0)
    hint = ": the GID index or the MTU does not suit this port or the peer's (on RoCE choose a RoCE v2 GID with "
           "LOOM_IB_GID_INDEX, see ibv_devinfo -v; check that both ports are up with the same MTU)";
  else if (err == EINVAL)
    hint = ": the device refused the QP's attributes (LOOM_IB_TIMEOUT, LOOM_IB_RETRY_CNT, LOOM_IB_TC, LOOM_IB_SL)";
  else if (err == ENODEV || err == ETIMEDOUT)
    hint = ": the port or its GID went away (check the interface under the port)";
  return systemError("ib: ibv_modify_qp to {} failed ({}): {}{}", state, details, std::strerror(err), hint);
}

}  // namespace loom::net::ib
