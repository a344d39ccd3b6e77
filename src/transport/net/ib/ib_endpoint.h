// What both ends of an ib connection have: reliable-connection QPs on one port, the completion queue
// they share and its completion channel (what a waiting thread sleeps on), and the TCP side channel the
// connection was set up over, kept open because its end is how a peer that exits or crashes is noticed
// at once (its QPs just stop answering, which verbs reports only after the full retry time).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "base/status.h"
#include "transport/connection.h"
#include "transport/net/ib/ib_config.h"
#include "transport/net/ib/ib_devices.h"

namespace loom::net::ib {

// A port's address as the peer needs it to reach our QPs.
struct PortAddress {
  uint8_t gid[16] = {};
  uint16_t lid = 0;
  uint8_t mtu = 0;       // ibv_mtu
  uint8_t ethernet = 0;  // RoCE: address by GID
  uint32_t reserved = 0;
};
static_assert(sizeof(PortAddress) == 24);

// Work queue depths: up to kMaxRequestsPerComm messages and as many clear-to-send writes in flight
// per QP, and the sender keeps twice that many receives posted for the clear-to-send immediates.
inline constexpr int kSendDepth = 2 * kMaxRequestsPerComm;
inline constexpr int kRecvDepth = 2 * kMaxRequestsPerComm + 8;
inline constexpr int kCqDepth = 8 * kMaxRequestsPerComm;

class IbEndpoint {
 public:
  static Status create(const IbPort& port, const IbConfig& config, int nqps, std::unique_ptr<IbEndpoint>* out);
  ~IbEndpoint();
  IbEndpoint(const IbEndpoint&) = delete;
  IbEndpoint& operator=(const IbEndpoint&) = delete;

  // An endpoint of one QP on the same port, connected to itself: what a receive comm flushes GPU
  // memory with (an RDMA read through the NIC orders the data written before it).
  Status createLoopback(std::unique_ptr<IbEndpoint>* out) const;
  const IbConfig& config() const { return config_; }

  // More QPs (in INIT), up to `total`: the side that asks for more decides.
  Status growTo(int total);
  int qpCount() const { return static_cast<int>(qps_.size()); }
  std::vector<uint32_t> qpNumbers() const;
  PortAddress localAddress() const;
  // Every QP to RTR then RTS, the i-th talking to the peer's `remoteQps[i]`.
  Status connect(const PortAddress& remote, const std::vector<uint32_t>& remoteQps);

  // The side channel, and the peer's name in messages (its address, GID or LID, first QP).
  void keepSideChannel(Socket socket);
  // Tells the peer (at the end of the side channel) that this side is of no further use.
  void closeSideChannel();
  const std::string& peer() const { return peer_; }

  const VerbsApi& api() const { return port_.device->api(); }
  IbDevice& device() const { return *port_.device; }
  const std::shared_ptr<IbDevice>& devicePointer() const { return port_.device; }
  Status postSend(int qp, ibv_send_wr* wr, const char* what);
  Status postRecv(int qp, uint64_t wrId);

  // Takes the channel's pending events and hands every completion to `handle`.
  Status drain(const std::function<Status(const ibv_wc&)>& handle);
  // Before a thread sleeps: asks for an event at the next completion. A completion that came after
  // the last drain raises none, so the caller drains once more after arming.
  Status arm();
  void addWaits(WaitList* waits) const;
  // loomRemoteError once the side channel closed a little while ago (completions that were on their
  // way before the peer left still arrive in that time).
  Status peerAlive();

 private:
  explicit IbEndpoint(const IbPort& port, const IbConfig& config) : port_(port), config_(config) {}
  Status createQp(ibv_qp** out);

  IbPort port_;
  IbConfig config_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;
  Socket side_;
  std::string peer_ = "the peer";
  uint64_t nextCheckNs_ = 0, closedAtNs_ = 0;
  unsigned unackedEvents_ = 0;
};

}  // namespace loom::net::ib
