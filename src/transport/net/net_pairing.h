// Network connections made on first use (LOOM_NET_CONNECT=lazy, the default): a rank connects to a
// network peer the first time an operation needs it, every channel and both ways at once, instead of
// to every network peer at init (n peers x channels x 2 comms per rank: at a thousand ranks across
// hosts, thousands of sockets per rank that its plans never use).
//
// Each side of a pair offers the other the handles it listens on for it, in a message through the
// bootstrap (PeerExchange::sendMessage, which never waits on the peer), takes the peer's offer once it
// came, and drives its connects and accepts. Nothing here waits: an operation that needs a peer not
// yet connected calls advance() on every pass of its wait, and its peer does the same on its side,
// since both sides' plans name each other (a collective's, a matched send and receive). A receive from
// any rank cannot know whom to offer: it answers the peers whose offers came (peersToAnswer()).
//
// The cost of the first use: one message each way and the provider's connects (a millisecond or so
// over TCP). Unlike connections made at init, a send to a peer that takes no part in any operation
// with this rank waits for it (as NCCL's connections made at run time do); LOOM_NET_CONNECT=eager
// makes them all at init.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/exchange.h"
#include "transport/net/net_connection.h"
#include "transport/net/net_setup.h"
#include "transport/net/provider.h"

namespace loom::net {

class NetPairing {
 public:
  // `provider` and `counters` outlive this object; `exchange` too (the communicator's bootstrap).
  NetPairing(PeerExchange* exchange, Provider* provider, int device, const NetLinks& links, SendCounters* counters);
  ~NetPairing();

  // One connection each way per channel, indexed by channel.
  struct Connections {
    std::vector<std::unique_ptr<SendConnection>> sends;
    std::vector<std::unique_ptr<RecvConnection>> recvs;
  };
  // Advances the pairing with `peer` as far as it goes without waiting on it. When it completes,
  // *up is true and *made holds the peer's connections (handed over once; later calls say *up only).
  // An error names the peer: it is gone, it failed and said so, or its provider differs.
  Status advance(int peer, Connections* made, bool* up);
  // The peers whose pairing is under way, or whose offers came unasked (a receive from any rank
  // advances them), in rank order.
  Status peersToAnswer(std::vector<int>* peers);
  // Whether the pairing with `peer` started and has not completed.
  bool pending(int peer) const;
  // After this rank failed: each of `unconnected` (the network peers it has no connections with) gets
  // its failure notice (as connections carry one: the reason, and the rank it gave up waiting on, or
  // -1), within a bounded time; a peer whose pairing is under way fails naming this rank instead of
  // waiting for an answer, and a peer looking for who stopped hears it from this rank too.
  void abandon(const std::string& reason, int waitsOn, const std::vector<int>& unconnected);
  // The notice `peer` sent this rank that way, if it did.
  bool notice(int peer, int* waitsOn, std::string* reason);

 private:
  enum class Stage { Idle, Offered, Connecting, Up, Failed };
  struct Pair;
  Status offer(int peer, Pair& pair);
  Status takeOffer(int peer, Pair& pair, bool* taken);
  Status drive(int peer, Pair& pair, Connections* made, bool* up);
  Status tellFailure(int peer, const Status& why);
  // loomRemoteError (loomTimeout where it gave up waiting on another rank) when `peer` sent its failure
  // notice instead of what this rank waits for; else Ok.
  Status peerGaveUp(int peer);
  void takeNotices();  // the notices that came, into notices_

  struct Notice {
    int waitsOn = -1;
    std::string reason;
  };
  std::map<int, Notice> notices_;
  uint64_t noticesTakenNs_ = 0;

  PeerExchange* exchange_;
  Provider* provider_;
  int device_;
  NetLinks links_;
  SendCounters* counters_;
  std::map<int, std::unique_ptr<Pair>> pairs_;  // only the peers this rank reached or that reached it
};

}  // namespace loom::net
