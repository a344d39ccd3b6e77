// The ib provider over FakeVerbs, a test double of libibverbs (fake_verbs/README.md): what these tests
// prove is the provider's own logic (discovery, LOOM_IB_* settings, GID choice, the handshake, the
// protocol's state machines, cleanup) and its error paths against Loom's model of verbs, with faults
// injected where real verbs would fail: completion errors (status 12, RNR), ibv_reg_mr ENOMEM,
// ibv_modify_qp EINVAL. Real verbs semantics are the Soft-RoCE VM's to prove (provider_test.cc's
// "ib_verbs" cases). Every wait here is bounded: a hang fails the test.
#include <gtest/gtest.h>
#include <dlfcn.h>
#include <poll.h>

#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/clock.h"
#include "loom.h"
#include "transport/net/ib/gid_choice.h"
#include "transport/net/ib/hca_filter.h"
#include "transport/net/ib/ib_provider.h"
#include "transport/net/net_connection.h"
#include "transport/net/net_setup.h"
#include "transport/net/provider_choice.h"
#include "ib_fake_fixture.h"
#include "verbs_choice.h"

namespace loom::net {
namespace {

using ib::GidEntry;
using ib::GidType;
using ib::HcaFilter;

// ---- pure parts ----------------------------------------------------------------------------------

TEST(IbHcaFilter, NcclSyntax) {
  HcaFilter f;
  ASSERT_TRUE(ib::parseHcaFilter("", &f).ok());
  EXPECT_TRUE(f.matches("mlx5_0", 1));
  ASSERT_TRUE(ib::parseHcaFilter("mlx5_1", &f).ok());  // a prefix
  EXPECT_TRUE(f.matches("mlx5_1", 1));
  EXPECT_TRUE(f.matches("mlx5_12", 2));
  EXPECT_FALSE(f.matches("mlx5_0", 1));
  ASSERT_TRUE(ib::parseHcaFilter("=mlx5_1", &f).ok());  // exact
  EXPECT_TRUE(f.matches("mlx5_1", 1));
  EXPECT_FALSE(f.matches("mlx5_12", 1));
  ASSERT_TRUE(ib::parseHcaFilter("mlx5_0:1,mlx5_2", &f).ok());
  EXPECT_TRUE(f.matches("mlx5_0", 1));
  EXPECT_FALSE(f.matches("mlx5_0", 2));
  EXPECT_TRUE(f.matches("mlx5_2", 2));
  ASSERT_TRUE(ib::parseHcaFilter("^=mlx5_0:2", &f).ok());  // exclude one port, exactly
  EXPECT_TRUE(f.matches("mlx5_0", 1));
  EXPECT_FALSE(f.matches("mlx5_0", 2));
  EXPECT_TRUE(f.matches("mlx5_01", 2));
  ASSERT_TRUE(ib::parseHcaFilter("mlx5_0::0:0", &f).ok());  // empty port: every port; rail and plane ignored
  EXPECT_TRUE(f.matches("mlx5_0", 2));
  Status st = ib::parseHcaFilter("mlx5_0:x", &f);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("LOOM_IB_HCA"), std::string::npos) << st.message();
  std::string many;
  for (int i = 0; i < 33; ++i) many += fmt::format("d{},", i);
  EXPECT_FALSE(ib::parseHcaFilter(many, &f).ok());
}

ibv_gid gidOf(std::initializer_list<uint8_t> head, std::initializer_list<uint8_t> tail) {
  ibv_gid g{};
  std::copy(head.begin(), head.end(), g.raw);
  std::copy(tail.begin(), tail.end(), g.raw + 16 - tail.size());
  return g;
}

TEST(IbGidChoice, RoceV2WithIpv4First) {
  const ibv_gid linkLocal = gidOf({0xfe, 0x80}, {1});
  const ibv_gid v4 = gidOf({}, {0xff, 0xff, 10, 0, 0, 1});
  const ibv_gid v6 = gidOf({0x20, 0x01, 0x0d, 0xb8}, {7});
  const std::vector<GidEntry> table = {{0, linkLocal, GidType::RoceV1}, {1, linkLocal, GidType::RoceV2},
                                       {2, v4, GidType::RoceV1},        {3, v6, GidType::RoceV2},
                                       {4, v4, GidType::RoceV2},        {5, v6, GidType::RoceV1}};
  GidEntry chosen;
  std::string why;
  ASSERT_TRUE(ib::chooseGid(table, true, -1, &chosen, &why).ok());
  EXPECT_EQ(chosen.index, 4) << why;
  EXPECT_NE(why.find("RoCE v2 with an IPv4 address"), std::string::npos) << why;
  // Without an IPv4 one: the global IPv6 RoCE v2 GID, never a link-local one while others exist.
  ASSERT_TRUE(ib::chooseGid({table[0], table[1], table[3]}, true, -1, &chosen, &why).ok());
  EXPECT_EQ(chosen.index, 3);
  // Forced, and forced to nothing.
  ASSERT_TRUE(ib::chooseGid(table, true, 2, &chosen, &why).ok());
  EXPECT_EQ(chosen.index, 2);
  Status st = ib::chooseGid(table, true, 9, &chosen, &why);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("LOOM_IB_GID_INDEX=9"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("::ffff:10.0.0.1"), std::string::npos) << st.message();
  // InfiniBand: index 0.
  ASSERT_TRUE(ib::chooseGid({{0, linkLocal, GidType::Ib}}, false, -1, &chosen, &why).ok());
  EXPECT_EQ(chosen.index, 0);
  // A RoCE port without any address cannot be used, and says why.
  st = ib::chooseGid({}, true, -1, &chosen, &why);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("IP address"), std::string::npos) << st.message();
}

// ---- over FakeVerbs ------------------------------------------------------------------------------

TEST_F(IbOverFakeVerbs, DiscoversActivePortsWithTheirProperties) {
  std::unique_ptr<Provider> p;
  Status st = make(&p);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(p->name(), "ib");
  EXPECT_FALSE(p->interfaceNamedDevices());
  ASSERT_EQ(p->deviceCount(), 2);  // fakedown0's port is DOWN
  DeviceProperties roce, ib;
  ASSERT_TRUE(p->deviceProperties(0, &roce).ok());
  ASSERT_TRUE(p->deviceProperties(1, &ib).ok());
  EXPECT_EQ(roce.name, "fakeroce0");
  EXPECT_EQ(roce.port, 1);
  EXPECT_EQ(roce.speedMbps, 100000);  // 4 lanes of EDR
  EXPECT_EQ(ib.name, "fakeib0");
  EXPECT_EQ(ib.speedMbps, 200000);  // 4 lanes of HDR
  EXPECT_FALSE(roce.regIsGlobal);  // the net transport sends through registered slots
  EXPECT_EQ(directModeFor(roce), DirectMode::None);
  EXPECT_EQ(roce.maxRecvs, 1);
  int device = -1;
  ASSERT_TRUE(chooseDevice(*p, "fakeib", &device).ok());
  EXPECT_EQ(device, 1);
}

TEST_F(IbOverFakeVerbs, HcaSelectionAndItsErrors) {
  {
    ScopedEnv hca("LOOM_IB_HCA", "^fakeroce");
    std::unique_ptr<Provider> p;
    ASSERT_TRUE(make(&p).ok());
    ASSERT_EQ(p->deviceCount(), 1);
    DeviceProperties props;
    ASSERT_TRUE(p->deviceProperties(0, &props).ok());
    EXPECT_EQ(props.name, "fakeib0");
  }
  {
    ScopedEnv hca("LOOM_IB_HCA", "=fakedown0");
    std::unique_ptr<Provider> p;
    Status st = make(&p);
    EXPECT_EQ(st.code(), loomSystemError);
    EXPECT_NE(st.message().find("fakedown0 port 1: DOWN"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("left out by LOOM_IB_HCA"), std::string::npos) << st.message();
  }
  {
    ScopedEnv gid("LOOM_IB_GID_INDEX", "9");
    std::unique_ptr<Provider> p;
    Status st = make(&p);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("LOOM_IB_GID_INDEX=9"), std::string::npos) << st.message();
  }
  {
    ScopedEnv timeout("LOOM_IB_TIMEOUT", "40");
    std::unique_ptr<Provider> p;
    Status st = make(&p);
    EXPECT_EQ(st.code(), loomInvalidArgument);
    EXPECT_NE(st.message().find("LOOM_IB_TIMEOUT=40"), std::string::npos) << st.message();
  }
}

TEST_F(IbOverFakeVerbs, ChoiceByNameAndByDefault) {
  ScopedEnv lib("LOOM_IBVERBS_LIB", fakeVerbsPath());
  ScopedEnv plugin("LOOM_NET_PLUGIN", "none");
  std::unique_ptr<Provider> p;
  Status st = makeProvider({"ib", "lo"}, &p);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(p->name(), "ib");
  st = makeProvider({"", "lo"}, &p);  // preferred over ucx and socket when a port is ACTIVE
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(p->name(), "ib");
  p.reset();
  {
    ScopedEnv none("LOOM_FAKE_VERBS_DEVICES", "none");  // libibverbs without kernel support: skipped
    st = makeProvider({"", "lo"}, &p);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_NE(p->name(), "ib");
    st = makeProvider({"ib", "lo"}, &p);
    EXPECT_EQ(st.code(), loomSystemError);
    EXPECT_NE(st.message().find("LOOM_NET=ib"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("no usable RDMA port"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("Function not implemented"), std::string::npos) << st.message();
  }
  {
    ScopedEnv down("LOOM_FAKE_VERBS_DEVICES", "fakedown0:down:eth");  // no ACTIVE port: skipped
    st = makeProvider({"", "lo"}, &p);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_NE(p->name(), "ib");
  }
}

TEST(IbProviderChoice, MissingLibraryIsAClearError) {
  ScopedEnv lib("LOOM_IBVERBS_LIB", "/nonexistent/libibverbs.so.1");
  ScopedEnv plugin("LOOM_NET_PLUGIN", "none");
  std::unique_ptr<Provider> p;
  Status st = makeProvider({"ib", "lo"}, &p);
  EXPECT_EQ(st.code(), loomSystemError);
  EXPECT_NE(st.message().find("LOOM_NET=ib"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("cannot load /nonexistent/libibverbs.so.1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("No such file"), std::string::npos) << st.message();  // dlerror's words
  // Not asked for: skipped without a fuss.
  st = makeProvider({"", "lo"}, &p);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_NE(p->name(), "ib");
  // A library that is not libibverbs.
  ScopedEnv other("LOOM_IBVERBS_LIB", "libm.so.6");
  st = makeProvider({"ib", "lo"}, &p);
  EXPECT_EQ(st.code(), loomSystemError);
  EXPECT_NE(st.message().find("ibv_get_device_list@IBVERBS_1.1"), std::string::npos) << st.message();
}

// The side that asks for more QPs decides; messages round-robin over all of them, RoCE and IB alike.
TEST_F(IbOverFakeVerbs, SeveralQpsPerConnection) {
  std::unique_ptr<Provider> one, four;
  ASSERT_TRUE(make(&one).ok());
  {
    ScopedEnv qps("LOOM_IB_QPS_PER_CONNECTION", "4");
    ASSERT_TRUE(make(&four).ok());
  }
  for (int device : {0, 1}) {
    const long before = fake_.live();
    std::unique_ptr<SendComm> send;
    std::unique_ptr<RecvComm> recv;
    Status st = connect(*one, *four, device, &send, &recv);
    ASSERT_TRUE(st.ok()) << st.message();
    // Per side: a channel, a CQ, 4 QPs and one registration of its own.
    EXPECT_EQ(fake_.live() - before, 2 * (1 + 1 + 4 + 1));
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{5000}, size_t{1} << 20, size_t{3}, size_t{77}})
      ASSERT_TRUE((st = transfer(*send, *recv, bytes, bytes + 10)).ok()) << st.message();
  }
}

TEST_F(IbOverFakeVerbs, RetryExceededNamesThePeerAndTheGidIndex) {
  std::unique_ptr<Provider> p;
  ASSERT_TRUE(make(&p).ok());
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  ASSERT_TRUE(connect(*p, *p, 0, &send, &recv).ok());
  bool sent = true;
  Status st = transfer(*send, *recv, 4096, 4096, "retry_exceeded", &sent);
  EXPECT_FALSE(sent);
  EXPECT_EQ(st.code(), loomRemoteError) << st.message();
  for (const char* words : {"transport retry counter exceeded", "status 12", "cannot reach each other",
                            "LOOM_IB_GID_INDEX", "GID ::ffff:10.99.0.1", "127.0.0.1"})
    EXPECT_NE(st.message().find(words), std::string::npos) << words << " missing in: " << st.message();
  // The connection stays failed: the next message fails at once instead of waiting.
  Request* r = nullptr;
  char byte = 0;
  MemoryRegion* region = nullptr;
  ASSERT_TRUE(send->registerMemory(&byte, 1, kHostPointers, &region).ok());
  st = send->isend(&byte, 1, 0, region, &r);
  EXPECT_FALSE(st.ok());
  (void)send->deregisterMemory(region);
}

TEST_F(IbOverFakeVerbs, RnrExceededSaysTheReceiverWasNotReady) {
  std::unique_ptr<Provider> p;
  ASSERT_TRUE(make(&p).ok());
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  ASSERT_TRUE(connect(*p, *p, 1, &send, &recv).ok());  // the InfiniBand port: the peer is named by LID
  Status st = transfer(*send, *recv, 100, 100, "rnr_exceeded");
  EXPECT_EQ(st.code(), loomRemoteError) << st.message();
  for (const char* words : {"RNR retry counter exceeded", "status 13", "receiver not ready", "LID 2"})
    EXPECT_NE(st.message().find(words), std::string::npos) << words << " missing in: " << st.message();
}

TEST_F(IbOverFakeVerbs, RegistrationFailureSaysRaiseTheMemlockLimit) {
  std::unique_ptr<Provider> p;
  ASSERT_TRUE(make(&p).ok());
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  ASSERT_TRUE(connect(*p, *p, 0, &send, &recv).ok());
  ASSERT_EQ(fake_.inject("reg_mr_enomem", 1), 0);
  std::vector<char> buffer(1 << 20);
  MemoryRegion* region = nullptr;
  Status st = send->registerMemory(buffer.data(), buffer.size(), kHostPointers, &region);
  EXPECT_EQ(st.code(), loomSystemError);
  for (const char* words : {"ibv_reg_mr", "Cannot allocate memory", "ulimit -l"})
    EXPECT_NE(st.message().find(words), std::string::npos) << words << " missing in: " << st.message();
  // The next registration works; a second one of a sub-range reuses it (the cache).
  ASSERT_TRUE(send->registerMemory(buffer.data(), buffer.size(), kHostPointers, &region).ok());
  MemoryRegion* inner = nullptr;
  const long live = fake_.live();
  ASSERT_TRUE(send->registerMemory(buffer.data() + 4096, 100, kHostPointers, &inner).ok());
  EXPECT_EQ(inner, region);
  EXPECT_EQ(fake_.live(), live);
  EXPECT_TRUE(send->deregisterMemory(inner).ok());
  EXPECT_TRUE(send->deregisterMemory(region).ok());
  // A connection whose FIFO cannot be registered fails to come up, with the same advice.
  ASSERT_EQ(fake_.inject("reg_mr_enomem", 1), 0);
  std::unique_ptr<SendComm> send2;
  std::unique_ptr<RecvComm> recv2;
  st = connect(*p, *p, 0, &send2, &recv2);
  EXPECT_NE(st.message().find("ulimit -l"), std::string::npos) << st.message();
}

TEST_F(IbOverFakeVerbs, ModifyQpInvalidPointsAtGidAndMtuAndNobodyHangs) {
  std::unique_ptr<Provider> p;
  ASSERT_TRUE(make(&p).ok());
  ASSERT_EQ(fake_.inject("modify_qp_einval", 1), 0);
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  Status accepted;
  const uint64_t start = nowNs();
  Status st = connect(*p, *p, 0, &send, &recv, &accepted);
  EXPECT_LT(nowNs() - start, 5'000'000'000ull) << "a failed setup took as long as a hang";
  EXPECT_EQ(st.code(), loomSystemError) << st.message();
  for (const char* words : {"ibv_modify_qp to RTR", "Invalid argument", "GID index or the MTU", "LOOM_IB_GID_INDEX",
                            "GID index 3 (::ffff:10.99.0.1)"})
    EXPECT_NE(st.message().find(words), std::string::npos) << words << " missing in: " << st.message();
  // The other side learns that its peer gave up.
  EXPECT_FALSE(accepted.ok());
  EXPECT_EQ(recv, nullptr);
}

// Polls `request` on `comm` as a waiting thread would (sleeping on the comm's waits) until it is done,
// fails or 5 s pass; each sleep is checked to have something that wakes it.
template <typename Comm>
Status waitLikeAThread(Comm& comm, Request* request, bool* done) {
  *done = false;
  Status st;
  const Deadline deadline = Deadline::afterMs(5000);
  while (st.ok() && !*done && !deadline.expired()) {
    WaitList waits;
    comm.addWaits(&waits);
    if (waits.fds.empty() && waits.maxSleepUs == INT64_MAX) return internalError("nothing would wake a waiting thread");
    (void)poll(waits.fds.data(), waits.fds.size(), static_cast<int>(std::min<int64_t>(waits.maxSleepUs / 1000 + 1, 1000)));
    st = comm.test(request, done, nullptr);
  }
  return st;
}

// When one side of a connection fails, the other, waiting with nothing that could complete, fails
// too within a bound (through the side channel), while sleeping on its waits: never a hang. Both ways.
TEST_F(IbOverFakeVerbs, TheOtherSideOfAFailedConnectionFailsInTime) {
  std::unique_ptr<Provider> p;
  ASSERT_TRUE(make(&p).ok());
  for (bool senderFails : {true, false}) {
    SCOPED_TRACE(senderFails ? "the sender fails" : "the receiver fails");
    std::unique_ptr<SendComm> send;
    std::unique_ptr<RecvComm> recv;
    ASSERT_TRUE(connect(*p, *p, 0, &send, &recv).ok());
    std::vector<char> in(64);
    void* data = in.data();
    const size_t capacity = in.size();
    const int tag = 0;
    char byte = 1;
    Request* r = nullptr;
    Request* s = nullptr;
    bool done = false;
    Status st;
    if (senderFails) {
      ASSERT_TRUE(recv->irecv(1, &data, &capacity, &tag, nullptr, &r).ok());  // its clearance goes out fine
      ASSERT_EQ(fake_.inject("retry_exceeded", 1), 0);
      ASSERT_TRUE(send->isend(&byte, 1, 0, nullptr, &s).ok());  // the data write fails
      st = waitLikeAThread(*send, s, &done);
    } else {
      ASSERT_TRUE(send->isend(&byte, 1, 0, nullptr, &s).ok());
      ASSERT_EQ(fake_.inject("retry_exceeded", 1), 0);
      ASSERT_TRUE(recv->irecv(1, &data, &capacity, &tag, nullptr, &r).ok());  // the clearance write fails
      st = waitLikeAThread(*recv, r, &done);
    }
    ASSERT_NE(st.message().find("status 12"), std::string::npos) << st.message();
    const uint64_t start = nowNs();
    st = senderFails ? waitLikeAThread(*recv, r, &done) : waitLikeAThread(*send, s, &done);
    EXPECT_FALSE(done);
    EXPECT_EQ(st.code(), loomRemoteError) << st.message();
    EXPECT_NE(st.message().find("closed by the peer"), std::string::npos) << st.message();
    EXPECT_LT(nowNs() - start, 2'000'000'000ull);
  }
}

// A sender waiting for clearance sleeps on its completion channel and wakes when it arrives.
TEST_F(IbOverFakeVerbs, WaitingSleepsOnTheCompletionChannel) {
  std::unique_ptr<Provider> p;
  ASSERT_TRUE(make(&p).ok());
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  ASSERT_TRUE(connect(*p, *p, 0, &send, &recv).ok());
  int out = 42, in = 0;
  MemoryRegion* sr = nullptr;
  MemoryRegion* rr = nullptr;
  ASSERT_TRUE(send->registerMemory(&out, 4, kHostPointers, &sr).ok());
  ASSERT_TRUE(recv->registerMemory(&in, 4, kHostPointers, &rr).ok());
  Request* s = nullptr;
  ASSERT_TRUE(send->isend(&out, 4, 0, sr, &s).ok());
  WaitList waits;
  send->addWaits(&waits);
  ASSERT_GE(waits.fds.size(), 1u);
  EXPECT_EQ(waits.maxSleepUs, INT64_MAX) << "a sender with nothing to do should sleep until woken";
  EXPECT_EQ(poll(waits.fds.data(), waits.fds.size(), 0), 0) << "woken with nothing there";
  void* data = &in;
  const size_t capacity = 4;
  const int tag = 0;
  Request* r = nullptr;
  ASSERT_TRUE(recv->irecv(1, &data, &capacity, &tag, &rr, &r).ok());
  EXPECT_EQ(poll(waits.fds.data(), waits.fds.size(), 1000), 1) << "the clearance did not wake the sender";
  bool sent = false, received = false;
  const Deadline deadline = Deadline::afterMs(5000);
  while (!(sent && received) && !deadline.expired()) {
    if (!sent) {
      ASSERT_TRUE(send->test(s, &sent, nullptr).ok());
    }
    if (!received) {
      ASSERT_TRUE(recv->test(r, &received, nullptr).ok());
    }
  }
  EXPECT_EQ(in, 42);
  (void)send->deregisterMemory(sr);
  (void)recv->deregisterMemory(rr);
}

// Whole communicators: 3 ranks (threads) over LOOM_NET=ib on FakeVerbs, allreduce and send/recv.
TEST_F(IbOverFakeVerbs, CommunicatorsOverIb) {
  ScopedEnv lib("LOOM_IBVERBS_LIB", fakeVerbsPath());
  ScopedEnv net("LOOM_NET", "ib");
  ScopedEnv plugin("LOOM_NET_PLUGIN", "none");
  ScopedEnv transport("LOOM_TRANSPORT", "net");
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "20000");
  ScopedEnv ifname("LOOM_SOCKET_IFNAME", "lo");
  constexpr int n = 3;
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<std::string> errors(n);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < n; ++rank)
    ranks.emplace_back([&, rank] {
      loomComm_t comm = nullptr;
      auto fail = [&](const char* what) { errors[rank] = std::string(what) + ": " + loomGetLastError(comm); };
      if (loomCommInitRank(&comm, n, id, rank) != loomSuccess) return fail("init");
      const size_t count = 300000;  // larger than a slot: several messages per peer
      std::vector<float> data(count), sum(count);
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank + 1) * static_cast<float>(i % 97);
      if (loomAllReduce(data.data(), sum.data(), count, loomFloat32, loomSum, comm, nullptr) != loomSuccess)
        return fail("allreduce"), (void)loomCommDestroy(comm);
      for (size_t i = 0; i < count; ++i)
        if (sum[i] != 6.0f * static_cast<float>(i % 97)) {
          errors[rank] = "allreduce: wrong sum at " + std::to_string(i);
          break;
        }
      int token = rank * 10, got = -1;
      const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
      loomGroupStart();
      loomSend(&token, 1, loomInt32, next, comm, nullptr);
      loomRecv(&got, 1, loomInt32, prev, comm, nullptr);
      if (loomGroupEnd() != loomSuccess) fail("send/recv");
      else if (got != prev * 10) errors[rank] = "send/recv: got " + std::to_string(got);
      loomCommDestroy(comm);
    });
  for (auto& t : ranks) t.join();
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

}  // namespace
}  // namespace loom::net
