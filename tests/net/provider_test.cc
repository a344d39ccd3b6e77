// The network interface's conformance suite, run against every provider on the loopback device
// (provider_cases.h: socket, ucx, ib over FakeVerbs and real verbs, the socket provider as NCCL net
// plugins). Connections come up without blocking, messages of every size arrive whole and in order
// with up to the request limit outstanding, a receive may be larger than its message but never
// smaller, junk at a listening port is dropped, and a peer that goes away fails what waits on it.
#include <gtest/gtest.h>
#include <poll.h>

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/socket.h"
#include "provider_cases.h"
#include "transport/net/net_setup.h"
#include "transport/net/provider.h"
#include "transport/net/socket/socket_handshake.h"

namespace loom::net {
namespace {

struct Pair {
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
};

class Conformance : public ::testing::TestWithParam<ProviderCase> {
 protected:
  void SetUp() override {
    environment_ = std::make_unique<CaseEnvironment>(GetParam());
    Status st = GetParam().make(&provider_);
    ASSERT_TRUE(st.ok()) << st.message();
    st = chooseDevice(*provider_, GetParam().deviceSpec, &device_);
    ASSERT_TRUE(st.ok()) << st.message();
  }

  Status connect(Pair* pair, const std::function<void(const Handle&)>& beforeConnect = {}) {
    Handle handle;
    std::unique_ptr<ListenComm> listen;
    LOOM_TRY(provider_->listen(device_, &handle, &listen));
    if (beforeConnect) beforeConnect(handle);
    Handle copy = handle;
    const Deadline deadline = Deadline::afterMs(10000);
    while (!pair->send || !pair->recv) {
      if (!pair->send) LOOM_TRY(provider_->connect(device_, &copy, &pair->send));
      if (!pair->recv) LOOM_TRY(listen->accept(&pair->recv));
      if (deadline.expired()) return Status(loomTimeout, "connect/accept did not finish in 10 s");
    }
    return Status::Ok();
  }

  // Drives both ends until every request is done (or one fails, or 20 s pass).
  static Status finish(Pair& pair, std::vector<Request*>& sends, std::vector<Request*>& recvs,
                       std::vector<size_t>* recvSizes) {
    recvSizes->assign(recvs.size(), 0);
    const Deadline deadline = Deadline::afterMs(20000);
    size_t sendsLeft = sends.size(), recvsLeft = recvs.size();
    while (sendsLeft + recvsLeft > 0) {
      for (Request*& r : sends) {
        bool done = false;
        if (r) LOOM_TRY(pair.send->test(r, &done, nullptr));
        if (done) r = nullptr, --sendsLeft;
      }
      for (size_t i = 0; i < recvs.size(); ++i) {
        bool done = false;
        if (recvs[i]) LOOM_TRY(pair.recv->test(recvs[i], &done, &(*recvSizes)[i]));
        if (done) recvs[i] = nullptr, --recvsLeft;
      }
      if (deadline.expired()) return Status(loomTimeout, "requests not done in 20 s");
    }
    return Status::Ok();
  }

  std::unique_ptr<CaseEnvironment> environment_;  // declared first: it outlives the provider
  std::unique_ptr<Provider> provider_;
  int device_ = 0;
};

TEST_P(Conformance, DevicesDescribeThemselves) {
  ASSERT_GE(provider_->deviceCount(), 1);
  for (int d = 0; d < provider_->deviceCount(); ++d) {
    DeviceProperties p;
    ASSERT_TRUE(provider_->deviceProperties(d, &p).ok());
    EXPECT_FALSE(p.name.empty());
    EXPECT_TRUE(p.ptrSupport & kHostPointers);
    EXPECT_GE(p.maxRecvs, 1);
    EXPECT_GT(p.speedMbps, 0);
  }
  DeviceProperties none;
  EXPECT_FALSE(provider_->deviceProperties(provider_->deviceCount(), &none).ok());
}

// Messages of every size class (empty, inline, one piece, several pieces across streams), several in
// flight at once, each checked byte by byte; the receive buffers are larger than the messages.
TEST_P(Conformance, MessagesArriveWholeAndInOrder) {
  Pair pair;
  Status st = connect(&pair);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<size_t> sizes = {0, 1, 127, 128, 129, 4096, 65535, 65536, 65537, 300001, (1u << 20) + 3, 8u << 20};
  std::vector<std::vector<char>> out(sizes.size()), in(sizes.size());
  MemoryRegion* regions[2][16] = {};
  std::vector<Request*> sends, recvs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].resize(sizes[i]);
    for (size_t b = 0; b < sizes[i]; ++b) out[i][b] = static_cast<char>(b * 7 + i * 131 + (b >> 12));
    in[i].assign(sizes[i] + 64, 0x5a);
    ASSERT_TRUE(pair.send->registerMemory(out[i].data(), out[i].size(), kHostPointers, &regions[0][i]).ok());
    ASSERT_TRUE(pair.recv->registerMemory(in[i].data(), in[i].size(), kHostPointers, &regions[1][i]).ok());
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    void* data = in[i].data();
    const size_t capacity = in[i].size();
    const int tag = 7;
    Request* r = nullptr;
    const Deadline deadline = Deadline::afterMs(5000);
    while (!r && !deadline.expired()) ASSERT_TRUE(pair.recv->irecv(1, &data, &capacity, &tag, &regions[1][i], &r).ok());
    ASSERT_NE(r, nullptr);
    recvs.push_back(r);
    Request* s = nullptr;
    while (!s && !deadline.expired()) ASSERT_TRUE(pair.send->isend(out[i].data(), sizes[i], tag, regions[0][i], &s).ok());
    ASSERT_NE(s, nullptr);
    sends.push_back(s);
  }
  std::vector<size_t> got;
  st = finish(pair, sends, recvs, &got);
  ASSERT_TRUE(st.ok()) << st.message();
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(got[i], sizes[i]) << "message " << i;
    EXPECT_TRUE(std::equal(out[i].begin(), out[i].end(), in[i].begin())) << "message " << i << " of " << sizes[i] << " bytes";
    EXPECT_EQ(in[i][sizes[i]], 0x5a) << "message " << i << " wrote past its size";
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_TRUE(pair.send->deregisterMemory(regions[0][i]).ok());
    EXPECT_TRUE(pair.recv->deregisterMemory(regions[1][i]).ok());
  }
}

// kMaxRequestsPerComm receives and sends outstanding at once; every message carries its index.
TEST_P(Conformance, RequestLimitOutstanding) {
  Pair pair;
  Status st = connect(&pair);
  ASSERT_TRUE(st.ok()) << st.message();
  constexpr int n = kMaxRequestsPerComm;
  std::vector<std::vector<uint32_t>> out(n, std::vector<uint32_t>(20000)), in(n, std::vector<uint32_t>(20000));
  MemoryRegion* sendRegion = nullptr;
  MemoryRegion* recvRegion = nullptr;
  ASSERT_TRUE(pair.send->registerMemory(out[0].data(), 4, kHostPointers, &sendRegion).ok());
  ASSERT_TRUE(pair.recv->registerMemory(in[0].data(), 4, kHostPointers, &recvRegion).ok());
  std::vector<Request*> sends(n), recvs(n);
  for (int i = 0; i < n; ++i) {
    for (size_t k = 0; k < out[i].size(); ++k) out[i][k] = static_cast<uint32_t>(i * 100000 + k);
    void* data = in[i].data();
    const size_t bytes = in[i].size() * 4;
    const int tag = 0;
    ASSERT_TRUE(pair.recv->irecv(1, &data, &bytes, &tag, &recvRegion, &recvs[i]).ok());
    ASSERT_NE(recvs[i], nullptr) << "receive " << i << " of " << n << " refused";
    ASSERT_TRUE(pair.send->isend(out[i].data(), bytes, tag, sendRegion, &sends[i]).ok());
    ASSERT_NE(sends[i], nullptr) << "send " << i << " of " << n << " refused";
  }
  std::vector<size_t> got;
  st = finish(pair, sends, recvs, &got);
  ASSERT_TRUE(st.ok()) << st.message();
  for (int i = 0; i < n; ++i) EXPECT_EQ(in[i], out[i]) << "message " << i;
}

TEST_P(Conformance, ReceiveSmallerThanMessageIsAnError) {
  Pair pair;
  Status st = connect(&pair);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<char> out(100000, 1), in(1000);
  MemoryRegion* sr = nullptr;
  MemoryRegion* rr = nullptr;
  ASSERT_TRUE(pair.send->registerMemory(out.data(), out.size(), kHostPointers, &sr).ok());
  ASSERT_TRUE(pair.recv->registerMemory(in.data(), in.size(), kHostPointers, &rr).ok());
  void* data = in.data();
  const size_t capacity = in.size();
  const int tag = 0;
  std::vector<Request*> recvs(1), sends(1);
  ASSERT_TRUE(pair.recv->irecv(1, &data, &capacity, &tag, &rr, &recvs[0]).ok());
  ASSERT_TRUE(pair.send->isend(out.data(), out.size(), tag, sr, &sends[0]).ok());
  // The send is driven too (a provider may move it only when tested) but may never finish, or fail:
  // the receive's failure is what is checked.
  bool received = false, sendOver = false;
  const Deadline deadline = Deadline::afterMs(20000);
  st = Status::Ok();
  while (st.ok() && !received && !deadline.expired()) {
    if (!sendOver && sends[0]) sendOver = !pair.send->test(sends[0], &sendOver, nullptr).ok() || sendOver;
    st = pair.recv->test(recvs[0], &received, nullptr);
  }
  EXPECT_FALSE(received) << "a 100000-byte message filled a 1000-byte receive";
  EXPECT_FALSE(st.ok()) << "the receive neither failed nor finished in 20 s";
  pair = Pair{};  // the unfinished send may still read `out`: its comm goes first
}

// Strangers at the listening port before the real sender: one sends junk, one a forged hello, one
// connects and says nothing. The real connection comes up and carries a message.
TEST_P(Conformance, JunkAtTheListeningPortIsDropped) {
  Pair pair;
  std::vector<Socket> strangers;
  Status st = connect(&pair, [&](const Handle& handle) {
    const SocketAddress addr = GetParam().listenAddress(handle);
    for (int kind = 0; kind < 3; ++kind) {
      Socket s;
      ASSERT_TRUE(connectTo(addr, Deadline::afterMs(2000), nullptr, &s).ok());
      std::vector<char> bytes;
      if (kind == 0) bytes.assign(500, '\x17');
      if (kind == 1) {
        socket::Hello forged;
        forged.secret = 42;
        bytes.assign(reinterpret_cast<char*>(&forged), reinterpret_cast<char*>(&forged) + sizeof forged);
      }
      if (!bytes.empty()) {
        ASSERT_TRUE(sendAll(s, bytes.data(), bytes.size(), Deadline::afterMs(2000), nullptr).ok());
      }
      strangers.push_back(std::move(s));
    }
  });
  ASSERT_TRUE(st.ok()) << st.message();
  int out = 1234567, in = 0;
  MemoryRegion* sr = nullptr;
  MemoryRegion* rr = nullptr;
  ASSERT_TRUE(pair.send->registerMemory(&out, 4, kHostPointers, &sr).ok());
  ASSERT_TRUE(pair.recv->registerMemory(&in, 4, kHostPointers, &rr).ok());
  void* data = &in;
  const size_t capacity = 4;
  const int tag = 0;
  std::vector<Request*> recvs(1), sends(1);
  ASSERT_TRUE(pair.recv->irecv(1, &data, &capacity, &tag, &rr, &recvs[0]).ok());
  ASSERT_TRUE(pair.send->isend(&out, 4, tag, sr, &sends[0]).ok());
  std::vector<size_t> got;
  st = finish(pair, sends, recvs, &got);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(in, out);
}

// The sender goes away: a receive that waits for its next message fails instead of waiting.
TEST_P(Conformance, PeerGoneFailsAPendingReceive) {
  Pair pair;
  Status st = connect(&pair);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<char> in(4096);
  MemoryRegion* rr = nullptr;
  ASSERT_TRUE(pair.recv->registerMemory(in.data(), in.size(), kHostPointers, &rr).ok());
  void* data = in.data();
  const size_t capacity = in.size();
  const int tag = 0;
  Request* r = nullptr;
  ASSERT_TRUE(pair.recv->irecv(1, &data, &capacity, &tag, &rr, &r).ok());
  pair.send.reset();
  const Deadline deadline = Deadline::afterMs(15000);
  bool done = false;
  while (st.ok() && !done && !deadline.expired()) st = pair.recv->test(r, &done, nullptr);
  EXPECT_FALSE(done) << "a receive completed without a message";
  EXPECT_FALSE(st.ok()) << "the receive still waits 15 s after its sender went away";
  EXPECT_EQ(st.code(), loomRemoteError) << st.message();
}

INSTANTIATE_TEST_SUITE_P(Providers, Conformance, ::testing::ValuesIn(providerCases()),
                         [](const ::testing::TestParamInfo<ProviderCase>& info) { return info.param.label; });

}  // namespace
}  // namespace loom::net
