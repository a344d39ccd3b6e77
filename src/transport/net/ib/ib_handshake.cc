#include "transport/net/ib/ib_handshake.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"

namespace loom::net::ib {

namespace {

constexpr const char* kWho = "ib handshake";

// The message's header and QP numbers once `e` holds all of it; *complete false while bytes are missing.
Status readSetup(Exchange& e, size_t offset, uint64_t secret, SetupMessage* message, std::vector<uint32_t>* qps,
                 bool* complete) {
  LOOM_TRY(e.readUpTo(offset + sizeof(SetupMessage), complete));
  if (!*complete) return Status::Ok();
  std::memcpy(message, e.received().data() + offset, sizeof *message);
  if (message->magic != kHelloMagic || message->version != kVersion || message->secret != secret ||
      message->qps == 0 || message->qps > static_cast<uint32_t>(kMaxQpsPerConnection))
    return errorStatus(loomRemoteError, "not an ib setup message for this connection (magic, version, secret or "
                                         "QP count wrong)");
  const size_t end = offset + sizeof(SetupMessage) + message->qps * sizeof(uint32_t);
  LOOM_TRY(e.readUpTo(end, complete));
  if (!*complete) return Status::Ok();
  qps->resize(message->qps);
  std::memcpy(qps->data(), e.received().data() + offset + sizeof(SetupMessage), message->qps * sizeof(uint32_t));
  return Status::Ok();
}

void queueSetup(Exchange& e, SetupMessage message, const std::vector<uint32_t>& qps) {
  message.qps = static_cast<uint32_t>(qps.size());
  e.queue(&message, sizeof message);
  e.queue(qps.data(), qps.size() * sizeof(uint32_t));
}

}  // namespace

// ---- receiver ------------------------------------------------------------------------------------

Status IbListenComm::create(const IbPort& port, const IbConfig& config, const SocketAddress& bindAddress,
                            Handle* handle, std::unique_ptr<ListenComm>* out) {
  std::unique_ptr<IbListenComm> l(new IbListenComm(port, config));
  IbHandle h;
  LOOM_TRY(listenOn(bindAddress, &l->listener_, &h.sideChannel));
  l->secret_ = h.secret = randomNonZero64();
  handle->bytes.fill(0);
  std::memcpy(handle->bytes.data(), &h, sizeof h);
  *out = std::move(l);
  return Status::Ok();
}

void IbListenComm::readHello(Exchange& e, bool* keep, bool* taken) {
  *keep = true;
  *taken = false;
  SetupMessage hello;
  std::vector<uint32_t> qps;
  bool complete = false;
  Status st = readSetup(e, 0, secret_, &hello, &qps, &complete);
  if (!st.ok()) {
    LOOM_WARN(Net, "ib provider: dropped a connection to its side-channel port: {}", st.message());
    *keep = false;
    return;
  }
  if (!complete) return;
  *keep = false;
  *taken = true;
}

// The sender's hello is in `sender`: the comm with its QPs, and the answer queued.
Status IbListenComm::answer(Exchange& sender) {
  SetupMessage hello;
  std::vector<uint32_t> senderQps;
  bool complete = false;
  LOOM_TRY(readSetup(sender, 0, secret_, &hello, &senderQps, &complete));
  const int nqps = std::max<int>(config_.qpsPerConnection, static_cast<int>(hello.qps));
  std::unique_ptr<IbEndpoint> endpoint;
  LOOM_TRY(IbEndpoint::create(port_, config_, nqps, &endpoint));
  LOOM_TRY(IbRecvComm::create(std::move(endpoint), &comm_));
  comm_->setPeerFifo(hello.fifoAddress, hello.fifoRkey);
  SetupMessage reply;
  reply.secret = secret_;
  reply.address = comm_->endpoint().localAddress();
  queueSetup(sender, reply, comm_->endpoint().qpNumbers());
  return Status::Ok();
}

Status IbListenComm::accept(std::unique_ptr<RecvComm>* out) {
  LOOM_TRY(acceptWaiting(listener_, kWho, [&](Socket s) {
    if (pending_.size() >= kMaxPendingStrangers) pending_.pop_front();
    pending_.emplace_back(std::move(s), kWho);
  }));
  for (auto it = pending_.begin(); !sender_ && it != pending_.end();) {
    bool keep = true, taken = false;
    readHello(*it, &keep, &taken);
    if (taken) {
      auto sender = std::make_unique<Exchange>(std::move(*it));
      LOOM_TRY(answer(*sender));
      sender_ = std::move(sender);
    }
    it = keep ? it + 1 : pending_.erase(it);
  }
  if (!sender_) return Status::Ok();
  bool sent = false;
  LOOM_TRY(sender_->flushOut(&sent));
  if (!sent) return Status::Ok();
  // "ready" follows the hello on the same stream.
  SetupMessage hello;
  std::memcpy(&hello, sender_->received().data(), sizeof hello);
  const size_t helloBytes = sizeof(SetupMessage) + hello.qps * sizeof(uint32_t);
  SetupMessage ready;
  std::vector<uint32_t> senderQps;
  bool complete = false;
  LOOM_TRY(readSetup(*sender_, helloBytes, secret_, &ready, &senderQps, &complete));
  if (!complete) return Status::Ok();
  if (static_cast<int>(senderQps.size()) != comm_->endpoint().qpCount())
    return errorStatus(loomRemoteError, "ib handshake: the sender has {} QPs for our {}", senderQps.size(),
                       comm_->endpoint().qpCount());
  LOOM_TRY(comm_->endpoint().connect(ready.address, senderQps));
  comm_->endpoint().keepSideChannel(std::move(sender_->socket()));
  LOOM_INFO(Net, "ib: connection from {} up over {} QP(s)", comm_->endpoint().peer(), senderQps.size());
  *out = std::move(comm_);
  sender_.reset();
  listener_.close();
  pending_.clear();
  return Status::Ok();
}

// ---- sender --------------------------------------------------------------------------------------

Status IbConnector::step(std::unique_ptr<SendComm>* out) {
  if (!comm_) {
    std::unique_ptr<IbEndpoint> endpoint;
    LOOM_TRY(IbEndpoint::create(port_, config_, config_.qpsPerConnection, &endpoint));
    LOOM_TRY(IbSendComm::create(std::move(endpoint), &comm_));
  }
  bool connected = false;
  LOOM_TRY(connect_.step(handle_.sideChannel, nullptr, &connected));
  if (!connected) return Status::Ok();
  if (!exchange_) {
    exchange_ = std::make_unique<Exchange>(std::move(connect_.socket()), kWho);
    SetupMessage hello;
    hello.secret = handle_.secret;
    hello.address = comm_->endpoint().localAddress();
    hello.fifoAddress = comm_->fifoAddress();
    hello.fifoRkey = comm_->fifoRkey();
    queueSetup(*exchange_, hello, comm_->endpoint().qpNumbers());
  }
  bool done = false;
  LOOM_TRY(exchange_->flushOut(&done));
  if (!done) return Status::Ok();
  if (!ready_) {
    SetupMessage reply;
    std::vector<uint32_t> receiverQps;
    Status st = readSetup(*exchange_, 0, handle_.secret, &reply, &receiverQps, &done);
    if (!st.ok())
      return st.withContext(fmt::format("ib handshake with {}", handle_.sideChannel.toString()));
    if (!done) return Status::Ok();
    IbEndpoint& endpoint = comm_->endpoint();
    LOOM_TRY(endpoint.growTo(static_cast<int>(receiverQps.size())));
    LOOM_TRY(endpoint.connect(reply.address, receiverQps));
    LOOM_TRY(comm_->start());
    SetupMessage ready;
    ready.secret = handle_.secret;
    ready.address = endpoint.localAddress();
    queueSetup(*exchange_, ready, endpoint.qpNumbers());
    ready_ = true;
    LOOM_TRY(exchange_->flushOut(&done));
    if (!done) return Status::Ok();
  }
  comm_->endpoint().keepSideChannel(std::move(exchange_->socket()));
  LOOM_INFO(Net, "ib: connection to {} up over {} QP(s)", comm_->endpoint().peer(), comm_->endpoint().qpCount());
  *out = std::move(comm_);
  exchange_.reset();
  return Status::Ok();
}

}  // namespace loom::net::ib
