// Connects one rank to all its network peers at once, at communicator init (LOOM_NET_CONNECT=eager, and
// plan kernels' network lanes; otherwise host connections are made on first use, net_pairing.h): per
// (peer, channel) a send connection to the peer and a receive connection from it. Each rank listens
// once per incoming connection and sends each network peer the handles it listens on for that peer
// (and the name of the provider it uses, so that a mismatch is an error naming the rank) in a message
// of its own (O(n) bytes per rank, not the O(n^2) of an all-gather). Every rank agrees on the outcome
// (4 bytes each) after listening, after sending and after receiving, so that no rank waits for a
// message or a connection a failed rank will never send; then every connect and accept is driven
// together until all are up, a peer says it failed, or the deadline passes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/exchange.h"
#include "transport/net/net_connection.h"
#include "transport/net/provider.h"

namespace loom::net {

struct NetLinks {
  int nchannels = 1;
  size_t nslots = 4;
  size_t slotBytes = 0;
  DirectMode direct = DirectMode::None;
  int64_t timeoutMs = 0;  // 0: none
};

// The tags of the handle messages (PeerExchange::sendMessage): the host transports' connections (at
// init, or on first use), and plan kernels' network lanes at their first device operation.
inline constexpr int kHostConnectionsTag = 0x4e455400;
inline constexpr int kLaneConnectionsTag = 0x4e455401;
// A failing rank's notice to the network peers it has no connection with (net_pairing.h), and a rank's
// word that its side of a pair is up and joined.
inline constexpr int kNetNoticeTag = 0x4e455402;
inline constexpr int kNetPairedTag = 0x4e455403;

// A failure notice as kNetNoticeTag's messages carry it: the rank it gave up waiting on (-1: a failure
// of its own), then its reason. Decoding fails (false) on a message too short to hold the first.
std::vector<char> encodeNetNotice(int waitsOn, const std::string& reason);
bool decodeNetNotice(const std::vector<char>& message, int* waitsOn, std::string* reason);

// The provider's comms both ways to every network peer, per channel: `peers[q]` says whether rank q is
// reached over the network (as q says of this rank); on success `sends`/`recvs` (indexed
// q * nchannels + c) hold one comm each way for every such (q, c), paired (Provider::pairComms).
// `provider` is null on a rank whose provider failed to start (`providerError`): that rank still takes
// part in the exchange, so that every rank fails with its error instead of waiting. Collective: every
// rank calls it, with the same `tag`.
Status connectNetComms(PeerExchange& exchange, Provider* provider, const Status& providerError, int device,
                       const std::vector<bool>& peers, int nchannels, int tag, int64_t timeoutMs,
                       std::vector<std::unique_ptr<SendComm>>* sends, std::vector<std::unique_ptr<RecvComm>>* recvs);

// This rank's outcome of a step of the setup, gathered from every rank (4 bytes each; the reasons only
// when some rank failed): every rank fails at setup naming the rank that could not set up its network,
// also ranks that have no network peer in common with it. Collective.
Status agreeOnNetOutcome(PeerExchange& exchange, const Status& mine);

// The same comms as Loom's connections (net_connection.h) for the host executor.
// `peers[q]` says whether rank q is reached over the network. On success `sends`/`recvs` (indexed
// q * nchannels + c) hold the connections of every network peer. `provider` is null on a rank whose
// provider failed to start: that rank still takes part in the exchange, so that every rank fails with
// its error instead of waiting. `providerError` is that failure.
Status connectNetPeers(PeerExchange& exchange, Provider* provider, const Status& providerError, int device,
                       const std::vector<bool>& peers, const NetLinks& links, SendCounters* counters,
                       std::vector<std::unique_ptr<SendConnection>>* sends,
                       std::vector<std::unique_ptr<RecvConnection>>* recvs);

// The first of the provider's devices whose name matches `spec` (LOOM_SOCKET_IFNAME syntax; "" takes the
// provider's first device).
Status chooseDevice(const Provider& provider, const std::string& spec, int* device);

// The NIC the topology gives a rank (the one closest to its GPU or NUMA node, topology/job_topology.h).
struct PreferredNic {
  std::string name;   // the graph's name: the RDMA device's (mlx5_0) or else the interface's (eth0)
  std::string busId;  // its PCI address ("0000:0c:00.0"), "" unknown
  int gpuPath = -1;   // the path class (PathType) from the rank's GPU to it; -1: no GPU or no path
};

// The provider's device that is `nic`: the same name, or the same PCI function (an interface ib0 and
// its RDMA device mlx5_0 are one NIC). -1 when the provider has no such device.
int findDevice(const Provider& provider, const PreferredNic& nic);

}  // namespace loom::net
