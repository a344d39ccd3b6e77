#include "transport/net/ucx/ucx_handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "transport/net/handshake.h"
#include "transport/net/ucx/ucx_comms.h"

namespace loom::net::ucx {

// ---- receiver ------------------------------------------------------------------------------------

Status UcxListenComm::create(std::shared_ptr<UcxWorker> worker, const SocketAddress& bindAddress, Handle* handle,
                             std::unique_ptr<ListenComm>* out) {
  std::unique_ptr<UcxListenComm> l(new UcxListenComm());
  UcxHandle h;
  LOOM_TRY(listenOn(bindAddress, &l->listener_, &h.outOfBand));
  l->worker_ = std::move(worker);
  l->secret_ = h.secret = randomNonZero64();
  l->tag_ = h.tag = randomNonZero64() & ~kGoodbyeBit;
  handle->bytes.fill(0);
  std::memcpy(handle->bytes.data(), &h, sizeof h);
  *out = std::move(l);
  return Status::Ok();
}

void UcxListenComm::step(Exchange& e, bool* keep, bool* taken) {
  *keep = true;
  *taken = false;
  bool done = false;
  Status st = e.readUpTo(sizeof(UcxHello), &done);
  UcxHello hello;
  if (st.ok() && done) {
    std::memcpy(&hello, e.received().data(), sizeof hello);
    if (hello.magic != kHelloMagic || hello.version != kVersion || hello.secret != secret_ ||
        hello.addressBytes == 0 || hello.addressBytes > kMaxAddressBytes)
      st = Status(loomRemoteError, "not a hello for this connection (wrong magic, version, secret or size)");
    else
      st = e.readUpTo(sizeof hello + hello.addressBytes, &done);
  }
  if (!st.ok()) {
    LOOM_WARN(Net, "ucx provider: dropped a connection to its handshake port: {}", st.message());
    *keep = false;
    return;
  }
  if (!done) return;
  senderAddress_.assign(e.received().begin() + sizeof hello, e.received().end());
  *keep = false;
  *taken = true;
}

Status UcxListenComm::accept(std::unique_ptr<RecvComm>* out) {
  LOOM_TRY(acceptWaiting(listener_, "ucx handshake", [&](Socket s) {
    if (pending_.size() >= kMaxPendingStrangers) pending_.pop_front();
    pending_.emplace_back(std::move(s), "ucx handshake");
  }));
  for (auto it = pending_.begin(); !sender_ && it != pending_.end();) {
    bool keep = true, taken = false;
    step(*it, &keep, &taken);
    if (taken) {
      sender_ = std::make_unique<Exchange>(std::move(it->socket()), "ucx handshake");
      const uint32_t reply[2] = {kHelloMagic, static_cast<uint32_t>(worker_->address().size())};
      sender_->queue(reply, sizeof reply);
      sender_->queue(worker_->address().data(), worker_->address().size());
    }
    it = keep ? it + 1 : pending_.erase(it);
  }
  if (!sender_) return Status::Ok();
  bool sent = false;
  LOOM_TRY(sender_->flushOut(&sent));
  if (!sent) return Status::Ok();
  auto link = std::make_unique<UcxLink>(worker_, tag_, false);
  LOOM_TRY(link->connectTo(senderAddress_));
  *out = std::make_unique<UcxRecvComm>(std::move(link));
  listener_.close();
  pending_.clear();
  return Status::Ok();
}

// ---- sender --------------------------------------------------------------------------------------

Status UcxConnector::step(std::unique_ptr<SendComm>* out) {
  bool connected = false;
  LOOM_TRY(connect_.step(handle_.outOfBand, nullptr, &connected));
  if (!connected) return Status::Ok();
  if (!exchange_) {
    exchange_ = std::make_unique<Exchange>(std::move(connect_.socket()), "ucx handshake");
    UcxHello hello;
    hello.secret = handle_.secret;
    hello.addressBytes = static_cast<uint32_t>(worker_->address().size());
    exchange_->queue(&hello, sizeof hello);
    exchange_->queue(worker_->address().data(), worker_->address().size());
  }
  bool done = false;
  LOOM_TRY(exchange_->flushOut(&done));
  if (!done) return Status::Ok();
  LOOM_TRY(exchange_->readUpTo(2 * sizeof(uint32_t), &done));
  if (!done) return Status::Ok();
  uint32_t reply[2];
  std::memcpy(reply, exchange_->received().data(), sizeof reply);
  if (reply[0] != kHelloMagic || reply[1] == 0 || reply[1] > kMaxAddressBytes)
    return errorStatus(loomRemoteError, "ucx handshake: {} answered with something else than a worker address",
                       handle_.outOfBand.toString());
  LOOM_TRY(exchange_->readUpTo(sizeof reply + reply[1], &done));
  if (!done) return Status::Ok();
  std::vector<char> address(exchange_->received().begin() + sizeof reply, exchange_->received().end());
  auto link = std::make_unique<UcxLink>(worker_, handle_.tag, true);
  LOOM_TRY(link->connectTo(address));
  *out = std::make_unique<UcxSendComm>(std::move(link));
  exchange_.reset();
  return Status::Ok();
}

}  // namespace loom::net::ucx
