// Strangers at the rendezvous (port scanners, junk, truncated or forged hellos) are dropped without
// disturbing a correct init.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <random>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "loom.h"

namespace {

using namespace loom;

void sendAndClose(const SocketAddress& addr, const std::vector<char>& bytes) {
  Socket s;
  if (!connectTo(addr, Deadline::afterMs(2000), nullptr, &s).ok()) return;
  if (!bytes.empty()) (void)sendAll(s, bytes.data(), bytes.size(), Deadline::afterMs(2000), nullptr);
}

TEST(BootstrapJunk, StrangersDoNotDisturbInit) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  UniqueIdData data;
  ASSERT_TRUE(decodeUniqueId(id, &data).ok());

  std::thread stranger([&] {
    std::mt19937 rng(42);
    std::vector<char> junk(300);
    for (char& c : junk) c = static_cast<char>(rng());
    sendAndClose(data.root, {});    // connect and leave
    sendAndClose(data.root, junk);  // garbage
    Hello forged;                   // right shape, wrong secret
    forged.kind = static_cast<uint32_t>(HelloKind::ToRoot);
    forged.rank = 0;
    forged.nranks = 2;
    std::vector<char> bytes(sizeof(forged));
    std::memcpy(bytes.data(), &forged, sizeof(forged));
    sendAndClose(data.root, bytes);
    bytes.resize(sizeof(forged) / 2);  // truncated
    sendAndClose(data.root, bytes);
  });
  stranger.join();

  loomComm_t comms[2] = {nullptr, nullptr};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] { EXPECT_EQ(loomCommInitRank(&comms[r], 2, id, r), loomSuccess); });
  for (auto& t : ranks) t.join();
  ASSERT_NE(comms[0], nullptr);
  ASSERT_NE(comms[1], nullptr);
  std::vector<std::thread> ops;
  for (int r = 0; r < 2; ++r)
    ops.emplace_back([&, r] {
      int value = r + 1, out = 0;
      EXPECT_EQ(loomAllReduce(&value, &out, 1, loomInt32, loomSum, comms[r], nullptr), loomSuccess);
      EXPECT_EQ(out, 3);
    });
  for (auto& t : ops) t.join();
  for (auto* c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

TEST(BootstrapJunk, MismatchedRankCountIsRefusedWithAMessage) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomComm_t a = nullptr, b = nullptr;
  loomResult_t ra = loomSuccess, rb = loomSuccess;
  setenv("LOOM_TIMEOUT_MS", "3000", 1);
  std::thread t1([&] { ra = loomCommInitRank(&a, 2, id, 0); });
  std::thread t2([&] { rb = loomCommInitRank(&b, 3, id, 1); });
  t1.join();
  t2.join();
  unsetenv("LOOM_TIMEOUT_MS");
  // One of them joined first and fixed nranks; the other is refused with a reason, and the rendezvous
  // fails the whole job: the first learns why from it instead of waiting out its timeout.
  EXPECT_NE(ra, loomSuccess);
  EXPECT_NE(rb, loomSuccess);
  if (a) loomCommDestroy(a);
  if (b) loomCommDestroy(b);
}

// A rank of another library version (its hello carries the job's secret and another wire version) is
// refused, and so is the job: the ranks that joined learn why, naming both versions.
TEST(BootstrapJunk, ARankOfAnotherWireVersionFailsTheJob) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  UniqueIdData data;
  ASSERT_TRUE(decodeUniqueId(id, &data).ok());
  loomComm_t comm = nullptr;
  loomResult_t result = loomSuccess;
  std::string why;
  setenv("LOOM_TIMEOUT_MS", "20000", 1);
  std::thread rank0([&] {
    result = loomCommInitRank(&comm, 2, id, 0);
    why = loomGetLastError(nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0 joins first (the test holds either way)
  Socket s;
  ASSERT_TRUE(connectTo(data.root, Deadline::afterMs(2000), nullptr, &s).ok());
  Hello old;
  old.version = kWireVersion - 1;
  std::memcpy(old.secret, data.secret, kSecretBytes);
  old.kind = static_cast<uint32_t>(HelloKind::ToRoot);
  old.rank = 1;
  old.nranks = 2;
  ASSERT_TRUE(sendAll(s, &old, sizeof(old), Deadline::afterMs(2000), nullptr).ok());
  Frame frame;
  ASSERT_TRUE(recvAll(s, &frame, sizeof(frame), Deadline::afterMs(5000), nullptr).ok());
  EXPECT_NE(frame.status, 0u);
  std::string reason(frame.bytes, '\0');
  ASSERT_TRUE(recvAll(s, reason.data(), reason.size(), Deadline::afterMs(5000), nullptr).ok());
  rank0.join();
  unsetenv("LOOM_TIMEOUT_MS");
  const std::string versions = fmt::format("wire version {}, the rendezvous version {}", kWireVersion - 1, kWireVersion);
  EXPECT_NE(reason.find(versions), std::string::npos) << reason;
  EXPECT_NE(result, loomSuccess);
  EXPECT_NE(why.find(versions), std::string::npos) << why;
  EXPECT_EQ(comm, nullptr);
}

// The port of the TCP listener on 127.0.0.<host> (this test's only one there), from /proc/net/tcp;
// 0 while there is none.
uint16_t listeningPortOn(uint8_t host) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  const std::string ip = fmt::format("{:02X}00007F", host);  // 127.0.0.host, little-endian hex
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.rfind(ip + ":", 0) == 0) return static_cast<uint16_t>(std::stoul(local.substr(9), nullptr, 16));
  }
  return 0;
}

// A stranger's junk on a host leader's listener, before that host's other ranks joined it, is dropped
// and the leader goes on taking its ranks: the job starts. (A leader used to wait there for another
// connection, its host's ranks unserved, and the rendezvous for their records: the job stalled until
// its timeout.)
TEST(BootstrapJunk, JunkAtAHostLeaderDoesNotStallItsHost) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  UniqueIdData data;
  ASSERT_TRUE(decodeUniqueId(id, &data).ok());
  constexpr uint8_t kHost = 77;  // the simulated host listens on 127.0.0.77
  constexpr int kTimeoutMs = 20000;
  auto rankInfo = [](int rank) {
    RankInfo self;
    self.listenAddress.family = AF_INET;
    self.listenAddress.addr[0] = 127;
    self.listenAddress.addr[3] = kHost;
    self.process.hostHash = 0x6a756e6b;  // one host for both ranks, two processes
    std::snprintf(self.process.hostname, sizeof(self.process.hostname), "junk-host");
    self.process.pid = 1000 + rank;
    self.process.nonce = 77 + static_cast<uint64_t>(rank);
    return self;
  };
  std::unique_ptr<Bootstrap> boots[2];
  Status results[2];
  const auto start = std::chrono::steady_clock::now();
  std::thread leader([&] { results[0] = Bootstrap::create(data, 0, 2, rankInfo(0), kTimeoutMs, nullptr, &boots[0]); });
  uint16_t port = 0;
  for (int i = 0; i < 500 && port == 0; ++i) {
    port = listeningPortOn(kHost);
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(port, 0) << "rank 0 never listened on 127.0.0.77";
  SocketAddress at = rankInfo(0).listenAddress;
  at.port = port;
  std::vector<char> junk(300, 'x');
  sendAndClose(at, junk);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the leader has taken the junk
  std::thread local([&] { results[1] = Bootstrap::create(data, 1, 2, rankInfo(1), kTimeoutMs, nullptr, &boots[1]); });
  leader.join();
  local.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(results[0].ok()) << results[0].message();
  ASSERT_TRUE(results[1].ok()) << results[1].message();
  EXPECT_LT(seconds, 10.0);
  EXPECT_TRUE(boots[0]->tree().isLeader());
  // And the two work together.
  int parts[2] = {0, 0};
  std::thread gather([&] {
    const int mine = 1;
    EXPECT_TRUE(boots[1]->allGather(&mine, parts, sizeof mine).ok());
  });
  int all[2] = {0, 0};
  const int mine = 0;
  EXPECT_TRUE(boots[0]->allGather(&mine, all, sizeof mine).ok());
  gather.join();
  EXPECT_EQ(all[1], 1);
  EXPECT_EQ(parts[0], 0);
}

}  // namespace
