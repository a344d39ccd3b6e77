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
      if (!sc) ASSERT_TRUE(provider_->connect(device, &handle, &sc).ok());
      if (!rc) ASSERT_TRUE(listen->accept(&rc).ok());
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
