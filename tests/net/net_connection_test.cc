// The net transport's connections over a real provider (socket, loopback): messages sent straight
// from the caller's buffer and through slots arrive in order and are counted by path, a sender's
// failure notice reaches the receiver as loomRemoteError with the reason, and a size the receiver did
// not expect is reported as a disagreement between the ranks.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/clock.h"
#include "transport/net/net_connection.h"
#include "transport/net/net_setup.h"
#include "transport/net/socket/socket_provider.h"

namespace loom::net {
namespace {

constexpr size_t kSlots = 4;
constexpr size_t kSlotBytes = 256 << 10;

class NetConnection : public ::testing::Test {
 protected:
  void SetUp() override {
    socket::SocketConfig config;
    config.nthreads = 1;
    config.nsocksPerThread = 2;
    config.inlineBytes = 1024;
    ASSERT_TRUE(socket::SocketProvider::create(config, &provider_).ok());
    int device = 0;
    ASSERT_TRUE(chooseDevice(*provider_, "lo", &device).ok());
    Handle handle;
    std::unique_ptr<ListenComm> listen;
    ASSERT_TRUE(provider_->listen(device, &handle, &listen).ok());
    std::unique_ptr<SendComm> sc;
    std::unique_ptr<RecvComm> rc;
    const Deadline deadline = Deadline::afterMs(10000);
    while ((!sc || !rc) && !deadline.expired()) {
      if (!sc) {
        ASSERT_TRUE(provider_->connect(device, &handle, &sc).ok());
      }
      if (!rc) {
        ASSERT_TRUE(listen->accept(&rc).ok());
      }
    }
    ASSERT_TRUE(sc && rc);
    DeviceProperties props;
    ASSERT_TRUE(provider_->deviceProperties(device, &props).ok());
    ASSERT_EQ(directModeFor(props), DirectMode::Unregistered);
    ASSERT_TRUE(NetSendConnection::create(std::move(sc), kSlots, kSlotBytes, 1, DirectMode::Unregistered, &counters_, &send_).ok());
    ASSERT_TRUE(NetRecvConnection::create(std::move(rc), kSlots, kSlotBytes, 0, &recv_).ok());
  }

  // Waits for the next message of `bytes`; the status of the receive that ended the wait.
  Status receive(size_t bytes, const void** data) {
    const Deadline deadline = Deadline::afterMs(10000);
    *data = nullptr;
    while (!*data) {
      LOOM_TRY(recv_->tryRecv(bytes, data));
      bool drained = false;
      (void)send_->flush(&drained);  // after notifyFailure the sender has let go: an error here is expected
      if (deadline.expired()) return Status(loomTimeout, "no message in 10 s");
    }
    return Status::Ok();
  }

  std::unique_ptr<Provider> provider_;
  SendCounters counters_;
  std::unique_ptr<NetSendConnection> send_;
  std::unique_ptr<NetRecvConnection> recv_;
};

TEST_F(NetConnection, DirectAndSlotSendsArriveInOrder) {
  std::vector<uint8_t> big(kSlotBytes), small(1000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 13);
  for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_TRUE(send_->sendsDirect());
  ASSERT_TRUE(send_->directSendReady());
  uint64_t ticket = 0;
  ASSERT_TRUE(send_->sendDirect(big.data(), big.size(), &ticket).ok());
  void* slot = send_->trySendBuffer();
  ASSERT_NE(slot, nullptr);
  std::memcpy(slot, small.data(), small.size());
  ASSERT_TRUE(send_->commitSend(small.size()).ok());

  const void* data = nullptr;
  Status st = receive(big.size(), &data);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(std::memcmp(data, big.data(), big.size()), 0);
  recv_->releaseRecv();
  st = receive(small.size(), &data);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(std::memcmp(data, small.data(), small.size()), 0);
  recv_->releaseRecv();
  const Deadline deadline = Deadline::afterMs(5000);
  while (!send_->sendDone(ticket) && !deadline.expired()) {
  }
  EXPECT_TRUE(send_->sendDone(ticket));
  EXPECT_EQ(counters_.direct, big.size());
  EXPECT_EQ(counters_.slots, small.size());
}

TEST_F(NetConnection, FailureNoticeNamesTheReason) {
  send_->notifyFailure("rank 1 gave up: the operator was tired");
  const void* data = nullptr;
  Status st = receive(16, &data);
  EXPECT_EQ(st.code(), loomRemoteError) << st.message();
  EXPECT_NE(st.message().find("the operator was tired"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  EXPECT_FALSE(recv_->peerFailure().ok());
  bool drained = false;
  EXPECT_FALSE(send_->flush(&drained).ok()) << "a connection let go of after a failure still sends";
}

TEST_F(NetConnection, UnexpectedSizeIsADisagreement) {
  std::vector<char> msg(100, 'x');
  void* slot = send_->trySendBuffer();
  ASSERT_NE(slot, nullptr);
  std::memcpy(slot, msg.data(), msg.size());
  ASSERT_TRUE(send_->commitSend(msg.size()).ok());
  const void* data = nullptr;
  Status st = receive(200, &data);
  EXPECT_EQ(st.code(), loomInvalidUsage) << st.message();
  EXPECT_NE(st.message().find("100 bytes where 200 were expected"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace loom::net

namespace loom::net {
namespace {

// Two providers (two ranks) with a connection each way, paired (Provider::pairComms): the control
// stream of both directions then shares one TCP connection. Messages of every size class still arrive
// whole and in order both ways, and one direction closing leaves the other working.
TEST(PairedComms, BothDirectionsShareOneControlConnection) {
  socket::SocketConfig config;
  config.nsocksPerThread = 2;
  config.inlineBytes = 4096;
  std::unique_ptr<Provider> a, b;
  ASSERT_TRUE(socket::SocketProvider::create(config, &a).ok());
  ASSERT_TRUE(socket::SocketProvider::create(config, &b).ok());
  int device = 0;
  ASSERT_TRUE(chooseDevice(*a, "lo", &device).ok());
  // a -> b and b -> a.
  Handle toB, toA;
  std::unique_ptr<ListenComm> listenB, listenA;
  ASSERT_TRUE(b->listen(device, &toB, &listenB).ok());
  ASSERT_TRUE(a->listen(device, &toA, &listenA).ok());
  std::unique_ptr<SendComm> aSend, bSend;
  std::unique_ptr<RecvComm> bRecv, aRecv;
  const Deadline deadline = Deadline::afterMs(10000);
  while ((!aSend || !bSend || !aRecv || !bRecv) && !deadline.expired()) {
    if (!aSend) {
      ASSERT_TRUE(a->connect(device, &toB, &aSend).ok());
    }
    if (!bSend) {
      ASSERT_TRUE(b->connect(device, &toA, &bSend).ok());
    }
    if (!bRecv) {
      ASSERT_TRUE(listenB->accept(&bRecv).ok());
    }
    if (!aRecv) {
      ASSERT_TRUE(listenA->accept(&aRecv).ok());
    }
  }
  ASSERT_TRUE(aSend && bSend && aRecv && bRecv);
  a->pairComms(*aSend, *aRecv);
  b->pairComms(*bSend, *bRecv);

  const std::vector<size_t> sizes = {1, 100, 4096, 4097, 70000, 1u << 20};
  std::vector<std::vector<char>> out(sizes.size()), inA(sizes.size()), inB(sizes.size());
  std::vector<Request*> sends, recvs;
  std::vector<Comm*> sendOwner, recvOwner;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].resize(sizes[i]);
    for (size_t k = 0; k < sizes[i]; ++k) out[i][k] = static_cast<char>(k * 31 + i);
    inA[i].resize(sizes[i]);
    inB[i].resize(sizes[i]);
    for (auto [recv, in] : {std::pair{aRecv.get(), &inA[i]}, std::pair{bRecv.get(), &inB[i]}}) {
      void* data = in->data();
      const size_t size = in->size();
      const int tag = 0;
      MemoryRegion* mr = nullptr;
      Request* r = nullptr;
      ASSERT_TRUE(recv->irecv(1, &data, &size, &tag, &mr, &r).ok());
      ASSERT_NE(r, nullptr);
      recvs.push_back(r);
      recvOwner.push_back(recv);
    }
    for (SendComm* send : {aSend.get(), bSend.get()}) {
      Request* r = nullptr;
      ASSERT_TRUE(send->isend(out[i].data(), sizes[i], 0, nullptr, &r).ok());
      ASSERT_NE(r, nullptr);
      sends.push_back(r);
      sendOwner.push_back(send);
    }
  }
  size_t left = sends.size() + recvs.size();
  const Deadline done = Deadline::afterMs(20000);
  while (left > 0 && !done.expired())
    for (auto [requests, owners] : {std::pair{&sends, &sendOwner}, std::pair{&recvs, &recvOwner}})
      for (size_t i = 0; i < requests->size(); ++i) {
        bool finished = false;
        if (!(*requests)[i]) continue;
        Status st = (*owners)[i]->test((*requests)[i], &finished, nullptr);
        ASSERT_TRUE(st.ok()) << st.message();
        if (finished) (*requests)[i] = nullptr, --left;
      }
  ASSERT_EQ(left, 0u) << "requests not done in 20 s";
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(inA[i], out[i]) << "b -> a message " << i;
    EXPECT_EQ(inB[i], out[i]) << "a -> b message " << i;
  }

  // a stops sending: b's next receive fails; b -> a still works.
  aSend.reset();
  char in = 0, msg = 42;
  void* data = &in;
  const size_t one = 1;
  const int tag = 0;
  MemoryRegion* mr = nullptr;
  Request* bWaits = nullptr;
  Request* aWaits = nullptr;
  Request* bSends = nullptr;
  ASSERT_TRUE(bRecv->irecv(1, &data, &one, &tag, &mr, &bWaits).ok());
  char inA2 = 0;
  void* dataA = &inA2;
  ASSERT_TRUE(aRecv->irecv(1, &dataA, &one, &tag, &mr, &aWaits).ok());
  ASSERT_TRUE(bSend->isend(&msg, 1, 0, nullptr, &bSends).ok());
  bool aGot = false, bFailed = false;
  const Deadline end = Deadline::afterMs(10000);
  while ((!aGot || !bFailed) && !end.expired()) {
    bool finished = false;
    if (!aGot) {
      ASSERT_TRUE(aRecv->test(aWaits, &aGot, nullptr).ok());
    }
    if (bSends && bSend->test(bSends, &finished, nullptr).ok() && finished) bSends = nullptr;
    if (!bFailed) bFailed = !bRecv->test(bWaits, &finished, nullptr).ok();
  }
  EXPECT_TRUE(aGot) << "b -> a stopped when a stopped sending";
  EXPECT_EQ(inA2, 42);
  EXPECT_TRUE(bFailed) << "b still waits for a message from a, which closed";
}

}  // namespace
}  // namespace loom::net
