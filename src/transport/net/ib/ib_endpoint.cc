#include "transport/net/ib/ib_endpoint.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "transport/net/ib/verbs_errors.h"

namespace loom::net::ib {

namespace {

constexpr uint64_t kPeerCheckNs = 1'000'000;   // how often a waiting test looks at the side channel
constexpr uint64_t kPeerGraceNs = 50'000'000;  // completions still arriving after the side channel closed
constexpr int kPollBatch = 16;

}  // namespace

Status IbEndpoint::create(const IbPort& port, const IbConfig& config, int nqps, std::unique_ptr<IbEndpoint>* out) {
  std::unique_ptr<IbEndpoint> e(new IbEndpoint(port, config));
  const VerbsApi& api = e->api();
  ibv_context* context = port.device->context();
  errno = 0;
  e->channel_ = api.createCompChannel(context);
  if (!e->channel_) return systemError("ib: ibv_create_comp_channel: {}", std::strerror(errno ? errno : ENOMEM));
  const int flags = fcntl(e->channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(e->channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return systemError("ib: completion channel: fcntl: {}", std::strerror(errno));
  e->cq_ = api.createCq(context, kCqDepth, nullptr, e->channel_, 0);
  if (!e->cq_) return systemError("ib: ibv_create_cq of {} entries: {}", kCqDepth, std::strerror(errno ? errno : ENOMEM));
  LOOM_TRY(e->growTo(nqps));
  *out = std::move(e);
  return Status::Ok();
}

Status IbEndpoint::createLoopback(std::unique_ptr<IbEndpoint>* out) const {
  std::unique_ptr<IbEndpoint> e;
  LOOM_TRY(create(port_, config_, 1, &e));
  LOOM_TRY(e->connect(e->localAddress(), e->qpNumbers()));
  e->peer_ = "its own flush QP";
  *out = std::move(e);
  return Status::Ok();
}

IbEndpoint::~IbEndpoint() {
  const VerbsApi& api = this->api();
  for (ibv_qp* qp : qps_)
    if (api.destroyQp(qp) != 0) LOOM_WARN(Net, "ib: ibv_destroy_qp: {}", std::strerror(errno));
  if (cq_) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (channel_ && api.getCqEvent(channel_, &cq, &context) == 0) ++unackedEvents_;
    if (unackedEvents_) api.ackCqEvents(cq_, unackedEvents_);
    if (api.destroyCq(cq_) != 0) LOOM_WARN(Net, "ib: ibv_destroy_cq: {}", std::strerror(errno));
  }
  if (channel_) api.destroyCompChannel(channel_);
}

Status IbEndpoint::createQp(ibv_qp** out) {
  const VerbsApi& api = this->api();
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = kSendDepth;
  init.cap.max_recv_wr = kRecvDepth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  errno = 0;
  ibv_qp* qp = api.createQp(port_.device->pd(), &init);
  if (!qp)
    return systemError("ib: ibv_create_qp on {} port {}: {}{}", port_.device->name(), port_.port,
                       std::strerror(errno ? errno : ENOMEM),
                       errno == ENOMEM ? " (the locked-memory limit may be too low: ulimit -l unlimited)" : "");
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(port_.port);
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  const int err = api.modifyQp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (err != 0) {
    api.destroyQp(qp);
    return modifyQpError(err, "INIT", fmt::format("{} port {}", port_.device->name(), port_.port));
  }
  *out = qp;
  return Status::Ok();
}

Status IbEndpoint::growTo(int total) {
  while (qpCount() < total) {
    ibv_qp* qp = nullptr;
    LOOM_TRY(createQp(&qp));
    qps_.push_back(qp);
  }
  return Status::Ok();
}

std::vector<uint32_t> IbEndpoint::qpNumbers() const {
  std::vector<uint32_t> numbers;
  for (ibv_qp* qp : qps_) numbers.push_back(qp->qp_num);
  return numbers;
}

PortAddress IbEndpoint::localAddress() const {
  PortAddress a;
  std::memcpy(a.gid, port_.gid.gid.raw, 16);
  a.lid = port_.lid;
  a.mtu = static_cast<uint8_t>(port_.mtu);
  a.ethernet = port_.ethernet ? 1 : 0;
  return a;
}

Status IbEndpoint::connect(const PortAddress& remote, const std::vector<uint32_t>& remoteQps) {
  if (remoteQps.size() != qps_.size())
    return internalError("ib: {} local QPs for {} of the peer", qps_.size(), remoteQps.size());
  if (remote.ethernet != (port_.ethernet ? 1 : 0))
    return systemError("ib: this port is {} but the peer's is {}: the two cannot be connected",
                       port_.ethernet ? "RoCE" : "InfiniBand", remote.ethernet ? "RoCE" : "InfiniBand");
  ibv_gid remoteGid;
  std::memcpy(remoteGid.raw, remote.gid, 16);
  const ibv_mtu mtu = static_cast<ibv_mtu>(std::min<int>(remote.mtu, port_.mtu));
  const std::string details =
      port_.ethernet ? fmt::format("{} port {}, GID index {} ({}) to GID {}, MTU {}", port_.device->name(), port_.port,
                                   port_.gid.index, gidText(port_.gid.gid), gidText(remoteGid), mtuBytes(mtu))
                     : fmt::format("{} port {}, LID {} to LID {}, MTU {}", port_.device->name(), port_.port, port_.lid,
                                   remote.lid, mtuBytes(mtu));
  const VerbsApi& api = this->api();
  for (size_t i = 0; i < qps_.size(); ++i) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = mtu;
    attr.dest_qp_num = remoteQps[i];
    attr.rq_psn = 0;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.port_num = static_cast<uint8_t>(port_.port);
    attr.ah_attr.sl = static_cast<uint8_t>(config_.serviceLevel);
    if (port_.ethernet) {
      attr.ah_attr.is_global = 1;
      attr.ah_attr.grh.dgid = remoteGid;
      attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port_.gid.index);
      attr.ah_attr.grh.hop_limit = 255;
      attr.ah_attr.grh.traffic_class = static_cast<uint8_t>(config_.trafficClass);
    } else {
      attr.ah_attr.dlid = remote.lid;
    }
    int err = api.modifyQp(qps_[i], &attr,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (err != 0) return modifyQpError(err, "RTR", details);
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = static_cast<uint8_t>(config_.timeout);
    attr.retry_cnt = static_cast<uint8_t>(config_.retryCount);
    attr.rnr_retry = 7;  // the receiver keeps receives posted; 7 waits for them without end
    attr.sq_psn = 0;
    attr.max_rd_atomic = 1;
    err = api.modifyQp(qps_[i], &attr,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                           IBV_QP_MAX_QP_RD_ATOMIC);
    if (err != 0) return modifyQpError(err, "RTS", details);
  }
  peer_ = fmt::format("{} QP {:#x}",
                      port_.ethernet ? "GID " + gidText(remoteGid) : fmt::format("LID {}", remote.lid),
                      remoteQps.empty() ? 0u : remoteQps[0]);
  return Status::Ok();
}

void IbEndpoint::keepSideChannel(Socket socket) {
  side_ = std::move(socket);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(side_.fd(), reinterpret_cast<sockaddr*>(&ss), &len) == 0)
    peer_ = fmt::format("{} ({})", SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&ss)).toString(), peer_);
}

void IbEndpoint::closeSideChannel() {
  if (side_.valid()) ::shutdown(side_.fd(), SHUT_RDWR);
}

Status IbEndpoint::postSend(int qp, ibv_send_wr* wr, const char* what) {
  ibv_send_wr* bad = nullptr;
  const int err = ibv_post_send(qps_[static_cast<size_t>(qp)], wr, &bad);
  if (err != 0) return systemError("ib: ibv_post_send ({}) to {}: {}", what, peer_, std::strerror(err));
  return Status::Ok();
}

Status IbEndpoint::postRecv(int qp, uint64_t wrId) {
  ibv_recv_wr wr{};
  wr.wr_id = wrId;
  ibv_recv_wr* bad = nullptr;
  const int err = ibv_post_recv(qps_[static_cast<size_t>(qp)], &wr, &bad);
  if (err != 0) return systemError("ib: ibv_post_recv for {}: {}", peer_, std::strerror(err));
  return Status::Ok();
}

Status IbEndpoint::drain(const std::function<Status(const ibv_wc&)>& handle) {
  const VerbsApi& api = this->api();
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (api.getCqEvent(channel_, &cq, &context) == 0) ++unackedEvents_;
  if (unackedEvents_ >= 64) {  // acknowledging takes a lock in the library: in batches
    api.ackCqEvents(cq_, unackedEvents_);
    unackedEvents_ = 0;
  }
  for (;;) {
    ibv_wc wcs[kPollBatch];
    const int n = ibv_poll_cq(cq_, kPollBatch, wcs);
    if (n < 0) return systemError("ib: ibv_poll_cq failed for the connection with {}", peer_);
    for (int i = 0; i < n; ++i) LOOM_TRY(handle(wcs[i]));
    if (n < kPollBatch) return Status::Ok();
  }
}

Status IbEndpoint::arm() {
  const int err = ibv_req_notify_cq(cq_, 0);
  if (err != 0) return systemError("ib: ibv_req_notify_cq: {}", std::strerror(err));
  return Status::Ok();
}

void IbEndpoint::addWaits(WaitList* waits) const {
  waits->add(channel_->fd, POLLIN);
  if (side_.valid()) waits->add(side_.fd(), POLLIN);
  if (closedAtNs_ != 0) {
    const uint64_t now = nowNs();
    waits->capSleep(now >= closedAtNs_ + kPeerGraceNs ? 0 : static_cast<int64_t>((closedAtNs_ + kPeerGraceNs - now) / 1000));
  }
}

Status IbEndpoint::peerAlive() {
  if (!side_.valid()) return Status::Ok();
  const uint64_t now = nowNs();
  if (closedAtNs_ == 0) {
    if (now < nextCheckNs_) return Status::Ok();
    nextCheckNs_ = now + kPeerCheckNs;
    char byte;
    const ssize_t r = ::recv(side_.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::Ok();
    // End of stream, an error, or bytes the peer never sends after the setup: it is gone or broken.
    closedAtNs_ = now;
  }
  if (now - closedAtNs_ < kPeerGraceNs) return Status::Ok();
  return errorStatus(loomRemoteError, "ib: the connection with {} was closed by the peer (did it exit or fail?)",
                     peer_);
}

}  // namespace loom::net::ib
