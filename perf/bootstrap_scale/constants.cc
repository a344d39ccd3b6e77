#include "constants.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/host_election.h"
#include "bootstrap/rank_table.h"
#include "bootstrap/wire.h"

namespace loom::bootstrap_scale {
namespace {

void check(const Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.message());
}

// Microseconds of this process's CPU (every thread: both ends of a loopback connection) per call of
// `step`, over `n` calls.
template <typename Step>
double cpuUsPer(int n, Step step) {
  const double before = processCpuSeconds(RUSAGE_SELF);
  for (int i = 0; i < n; ++i) step(i);
  return (processCpuSeconds(RUSAGE_SELF) - before) * 1e6 / n;
}

SocketAddress loopback() {
  SocketAddress a;
  a.family = AF_INET;
  a.addr[0] = 127;
  a.addr[3] = 1;
  return a;
}

Hello helloFor(const uint8_t* secret, HelloKind kind, int rank) {
  Hello h;
  std::memcpy(h.secret, secret, kSecretBytes);
  h.kind = static_cast<uint32_t>(kind);
  h.rank = rank;
  h.nranks = 1 << 20;
  return h;
}

// A rank's start: its listener, and its claim of its host's name (won: every iteration a host of its own).
double rankStartUs(const uint8_t* secret) {
  return cpuUsPer(2000, [&](int i) {
    Socket listener, host;
    SocketAddress bound;
    bool leads = false;
    check(listenOn(loopback(), &listener, &bound), "listen");
    check(claimHostLeadership(secret, 0x5eed0000u + static_cast<uint64_t>(i), &host, &leads), "claim");
  });
}

// A leader takes one of its host's ranks: the rank connects to the host's name and sends its record,
// the leader accepts, reads it and answers with its rank.
double joinUs(const uint8_t* secret) {
  Socket host;
  bool leads = false;
  check(claimHostLeadership(secret, 0x10ad, &host, &leads), "claim");
  constexpr int kJoins = 2000;
  std::thread leader([&] {
    for (int i = 0; i < kJoins; ++i) {
      Socket s;
      char record[sizeof(Hello) + sizeof(RankInfo)];
      int32_t me = 0;
      check(acceptOne(host, Deadline::afterMs(10000), nullptr, &s), "accept");
      check(recvAll(s, record, sizeof record, Deadline::afterMs(10000), nullptr), "record");
      check(sendAll(s, &me, sizeof me, Deadline::afterMs(10000), nullptr), "answer");
    }
  });
  const double us = cpuUsPer(kJoins, [&](int i) {
    Socket s;
    bool noLeader = false;
    check(connectToHostLeader(secret, 0x10ad, Deadline::afterMs(10000), &s, &noLeader), "join");
    const Hello h = helloFor(secret, HelloKind::ToLeader, i);
    RankInfo info;
    int32_t answer = -1;
    check(sendAll(s, &h, sizeof h, Deadline::afterMs(10000), nullptr), "hello");
    check(sendAll(s, &info, sizeof info, Deadline::afterMs(10000), nullptr), "record");
    check(recvAll(s, &answer, sizeof answer, Deadline::afterMs(10000), nullptr), "answer");
  });
  leader.join();
  return us;
}

// A short TCP connection: connect, a Hello, close; the other end accepts, reads it and closes.
double connectionUs(const uint8_t* secret) {
  Socket listener;
  SocketAddress bound;
  check(listenOn(loopback(), &listener, &bound), "listen");
  constexpr int kConnections = 2000;
  std::thread server([&] {
    for (int i = 0; i < kConnections; ++i) {
      Socket s;
      Hello h;
      check(acceptOne(listener, Deadline::afterMs(10000), nullptr, &s), "accept");
      check(recvAll(s, &h, sizeof h, Deadline::afterMs(10000), nullptr), "hello");
    }
  });
  const double us = cpuUsPer(kConnections, [&](int i) {
    Socket s;
    check(connectTo(bound, Deadline::afterMs(10000), nullptr, &s), "connect");
    const Hello h = helloFor(secret, HelloKind::ToRoot, i);
    check(sendAll(s, &h, sizeof h, Deadline::afterMs(10000), nullptr), "hello");
  });
  server.join();
  return us;
}

// The rendezvous takes a record: checks its Hello and keeps its RankInfo.
double recordUs(const uint8_t* secret) {
  constexpr int kRecords = 1 << 20;
  std::vector<char> wire(sizeof(Hello) + sizeof(RankInfo));
  const Hello h = helloFor(secret, HelloKind::ToRoot, 0);
  std::memcpy(wire.data(), &h, sizeof h);
  std::vector<RankInfo> kept(kRecords);
  return cpuUsPer(kRecords, [&](int i) {
    Hello parsed;
    check(parseHello(wire.data(), sizeof(Hello), secret, HelloKind::ToRoot, 1 << 20, &parsed), "parse");
    std::memcpy(&kept[static_cast<size_t>(i)], wire.data() + sizeof(Hello), sizeof(RankInfo));
  });
}

// Encoding and decoding the table, per rank (64k ranks on 8k hosts).
double tableRankUs() {
  constexpr int kRanks = 1 << 16, kPerHost = 8;
  std::vector<RankInfo> ranks(kRanks);
  std::vector<int32_t> hostOf(kRanks), leaderOf(kRanks / kPerHost);
  for (int r = 0; r < kRanks; ++r) {
    RankInfo& info = ranks[static_cast<size_t>(r)];
    info.listenAddress = loopback();
    info.listenAddress.addr[2] = static_cast<uint8_t>(r / kPerHost);
    info.listenAddress.addr[1] = static_cast<uint8_t>(r / kPerHost >> 8);
    info.listenAddress.port = static_cast<uint16_t>(1024 + r % kPerHost);
    info.process.pid = r + 1;
    hostOf[static_cast<size_t>(r)] = r / kPerHost;
    if (r % kPerHost == 0) leaderOf[static_cast<size_t>(r / kPerHost)] = r;
  }
  const double perRound = cpuUsPer(4, [&](int) {
    const std::vector<char> bytes = encodeRankTable(1, ranks, hostOf, leaderOf);
    RankTable table;
    check(decodeRankTable(bytes.data(), bytes.size(), kRanks, &table), "decode");
  });
  return perRound / (2.0 * kRanks);  // an encoding and a decoding per round
}

// A small message between two ranks of a host: one byte each way over a unix socket, per message.
double messageUs() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw std::runtime_error("socketpair failed");
  Socket a(fds[0]), b(fds[1]);
  constexpr int kRounds = 20000;
  std::thread echo([&] {
    char byte = 0;
    for (int i = 0; i < kRounds; ++i) {
      check(recvAll(b, &byte, 1, Deadline(), nullptr), "echo recv");
      check(sendAll(b, &byte, 1, Deadline(), nullptr), "echo send");
    }
  });
  const double us = cpuUsPer(kRounds, [&](int) {
    char byte = 1;
    check(sendAll(a, &byte, 1, Deadline(), nullptr), "send");
    check(recvAll(a, &byte, 1, Deadline(), nullptr), "recv");
  });
  echo.join();
  return us / 2;
}

double copyGbs() {
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<char> from(kBytes, 1), to(kBytes, 0);
  std::memcpy(to.data(), from.data(), kBytes);  // both faulted in
  const auto start = std::chrono::steady_clock::now();
  constexpr int kRounds = 8;
  for (int i = 0; i < kRounds; ++i) std::memcpy(to.data(), from.data(), kBytes);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return kRounds * static_cast<double>(kBytes) / s / 1e9;
}

// One machine playing the ranks: a rank's thread, with the load generator's small stack.
double threadStartUs() {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 << 10);
  const double us = cpuUsPer(2000, [&](int) {
    pthread_t t;
    if (pthread_create(&t, &attr, [](void*) -> void* { return nullptr; }, nullptr) != 0)
      throw std::runtime_error("pthread_create failed");
    pthread_join(t, nullptr);
  });
  pthread_attr_destroy(&attr);
  return us;
}

}  // namespace

double processCpuSeconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

loom::model::BootstrapConstants measureConstants() {
  uint8_t secret[kSecretBytes];
  for (size_t i = 0; i < kSecretBytes; ++i) secret[i] = static_cast<uint8_t>(0xc0 + i + getpid());
  loom::model::BootstrapConstants c;
  c.rankStartUs = rankStartUs(secret);
  c.joinUs = joinUs(secret);
  c.connectionUs = connectionUs(secret);
  c.recordUs = recordUs(secret);
  c.tableRankUs = tableRankUs();
  c.messageUs = messageUs();
  c.copyGbs = copyGbs();
  c.threadStartUs = threadStartUs();
  return c;
}

}  // namespace loom::bootstrap_scale
