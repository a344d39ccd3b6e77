// What transports need from the bootstrap during setup, as an interface so that transport/ does not
// depend on bootstrap/ (docs/DESIGN.md: dependencies point one way).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom {

class PeerExchange {
 public:
  virtual ~PeerExchange() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // Every rank contributes `bytes` bytes; `all` receives nranks * bytes, in rank order.
  virtual Status allGather(const void* mine, void* all, size_t bytes) = 0;
  virtual Status barrier() = 0;
  // A setup message to one peer, and the next one from a peer: for exchanges in which each rank needs
  // only its own part of every other rank's (an all-gather would hand every rank all n^2 parts).
  // `tag` names the exchange: a message of another exchange that comes first waits for its own call.
  virtual Status sendMessage(int peer, int tag, const void* data, size_t bytes) = 0;
  virtual Status recvMessage(int peer, int tag, std::vector<char>* out) = 0;
  // Without waiting: the ranks whose messages with `tag` arrived and were not taken yet, in rank order
  // (connections made on first use answer peers that asked first: transport/net/net_pairing.h).
  virtual Status arrivedFrom(int tag, std::vector<int>* senders) = 0;
  // The same short message to each of `peers` at once, as far as each can be reached within
  // `withinMs` (a failing rank's notice: peers that cannot be reached are passed over, not waited for).
  virtual void tellEach(const std::vector<int>& peers, int tag, const void* data, size_t bytes, int64_t withinMs) = 0;
  // Whether `peer`'s process is still there to answer (Ok), or loomRemoteError saying it is gone; a
  // peer on another host that stopped answering altogether is only found by a timeout.
  virtual Status probePeer(int peer) = 0;
};

// A setup step's outcome on every rank: `codes` is every rank's status code from an all-gather that
// just ran (in rank order), `mine` this rank's status. Ok when every rank succeeded. Otherwise every
// rank takes part in a second all-gather that carries the reasons (only then: every rank saw the same
// codes), and gets its own error if it failed, else loomRemoteError "rank R <failed>: <reason>" for the
// lowest failed rank R. So every rank fails the step naming the rank that caused it, instead of losing
// the connection to it in the next exchange. `context` names the step for an exchange's own error.
Status shareFailure(PeerExchange& exchange, const std::vector<int32_t>& codes, const Status& mine,
                    const std::string& failed, const std::string& context);

}  // namespace loom
