// Collectives across simulated hosts (host_bed.h) over one network provider, chosen by LOOM_TEST_NET
// (socket, ucx, plugin-v8 .. plugin-v12: Loom's socket provider loaded back as an NCCL net plugin).
// Ranks are processes placed on hosts in contiguous blocks, so ranks of one host talk over shared
// memory and hosts over the network, as on a cluster: every collective in and out of place on 2 and 4
// hosts with 1 and 2 ranks each (and the hierarchical plans forced), split communicators and grouped
// send/recv across hosts, netem delay and loss, a link taken down and a rank killed mid-collective,
// strangers sending junk to the ports of a host while it works, and loom-doctor naming a rank behind
// a down link.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../api/buffers.h"
#include "../api/cases.h"
#include "../api/harness.h"
#include "base/clock.h"
#include "base/socket.h"
#include "host_bed.h"

namespace loomtest {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBedHosts = 4;
constexpr int64_t kFaultTimeoutMs = 3000;

// The environment every rank inherits for the provider under test.
std::string useProvider() {
  const char* which = std::getenv("LOOM_TEST_NET");
  const std::string net = which ? which : "socket";
  if (net == "socket") {
    // Helper threads and several data streams here; the plugin runs cover the defaults (none, one).
    setenv("LOOM_NET", "socket", 1);
    setenv("LOOM_SOCKET_NTHREADS", "2", 1);
    setenv("LOOM_NSOCKS_PERTHREAD", "2", 1);
  } else if (net == "ucx") {
    setenv("LOOM_NET", "ucx", 1);
    // UCX would reach the other namespaces of this kernel through shared memory (ucx_worker.h).
    setenv("UCX_TLS", "tcp", 1);
    setenv("UCX_NET_DEVICES", "eth0", 1);
  } else if (net.rfind("plugin-v", 0) == 0) {
    const char* dir = std::getenv("LOOM_TEST_PLUGIN_DIR");
    const std::string file = std::string(dir ? dir : ".") + "/libnccl-net-loomsock-" + net.substr(7) + ".so";
    setenv("LOOM_NET_PLUGIN", file.c_str(), 1);
    setenv("LOOM_NET", "loomsock", 1);
  } else {
    return "LOOM_TEST_NET=" + net + " is not socket, ucx or plugin-vN";
  }
  return "";
}

class Hosts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setupError_ = useProvider();
    if (setupError_.empty()) bed_ = HostBed::create(kBedHosts, "", &setupError_, &unsupported_);
  }
  static void TearDownTestSuite() { bed_.reset(); }
  void SetUp() override {
    if (bed_) return;
    if (unsupported_) GTEST_SKIP() << setupError_;
    FAIL() << setupError_;
  }

  // Ranks hosts x perHost, rank r on host r / perHost.
  static RunOptions placed(int perHost, int timeoutSec = 300) {
    RunOptions options;
    options.timeoutSec = timeoutSec;
    options.placeRank = [perHost](int rank) { return bed_->enter(rank / perHost); };
    return options;
  }
  static void expectCasesPass(int hosts, int perHost, const std::vector<MatrixSpec>& specs) {
    std::vector<Case> cases;
    for (const MatrixSpec& spec : specs) {
      std::vector<Case> more = buildCases(spec, hosts * perHost);
      cases.insert(cases.end(), more.begin(), more.end());
    }
    const std::string failures = runRanks(Launch::Processes, hosts * perHost, placed(perHost),
                                          [&](RankContext& ctx) { return runCases(ctx, cases); });
    EXPECT_TRUE(failures.empty()) << cases.size() << " cases on " << hosts << " hosts x " << perHost << " ranks:\n"
                                  << failures;
  }

  static std::unique_ptr<HostBed> bed_;
  static std::string setupError_;
  static bool unsupported_;
};

std::unique_ptr<HostBed> Hosts::bed_;
std::string Hosts::setupError_;
bool Hosts::unsupported_ = false;

// Every collective, a representative set of dtypes and ops (rotating), in and out of place, small,
// odd and pipelined sizes (several chunks per channel, so direct sends overlap later writes).
std::vector<MatrixSpec> representativeMatrix() {
  MatrixSpec all{.colls = {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter,
                           Coll::AlltoAll, Coll::Gather, Coll::Scatter, Coll::SendRecv},
                 .dtypes = {loomFloat32, loomInt32, loomBfloat16, loomFloat64, loomUint8},
                 .ops = {Op::Sum, Op::Max, Op::Avg, Op::Prod},
                 .counts = {1, 1000, 65537},
                 .crossDtypeOp = false};
  MatrixSpec large{.colls = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast},
                   .dtypes = {loomFloat32},
                   .ops = {Op::Sum},
                   .counts = {(1u << 20) + 3},
                   .crossDtypeOp = false};
  return {all, large};
}

struct Shape {
  int hosts, perHost;
};

class HostShapes : public Hosts, public ::testing::WithParamInterface<Shape> {};

TEST_P(HostShapes, EveryCollective) { expectCasesPass(GetParam().hosts, GetParam().perHost, representativeMatrix()); }

INSTANTIATE_TEST_SUITE_P(Hosts, HostShapes, ::testing::Values(Shape{2, 1}, Shape{2, 2}, Shape{4, 1}, Shape{4, 2}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return std::to_string(info.param.hosts) + "hosts_x" + std::to_string(info.param.perHost);
                         });

// The hierarchical plans: within a host over shared memory, across hosts over the network.
TEST_F(Hosts, HierarchicalPlansCrossHosts) {
  setenv("LOOM_ALGO", "hier", 1);
  const std::vector<MatrixSpec> specs{{.colls = {Coll::AllReduce, Coll::Broadcast, Coll::Reduce},
                                       .dtypes = {loomFloat32, loomInt64},
                                       .ops = {Op::Sum, Op::Min},
                                       .counts = {7, 65537, (1u << 20) + 3},
                                       .crossDtypeOp = false}};
  expectCasesPass(2, 2, specs);
  expectCasesPass(4, 2, specs);
  unsetenv("LOOM_ALGO");
}

// Communicators split across hosts: one rank per host (colour rank % 2 on 4 hosts x 2), and whole
// hosts in reverse order (colour by host pair, keys reversed).
TEST_F(Hosts, SplitAcrossHosts) {
  const std::vector<Case> cases = buildCases({.colls = {Coll::AllReduce, Coll::AllGather, Coll::Broadcast, Coll::SendRecv},
                                              .dtypes = {loomFloat32, loomInt32},
                                              .ops = {Op::Sum, Op::Max},
                                              .counts = {3, 65537},
                                              .crossDtypeOp = false},
                                             4);
  const std::string failures = runRanks(Launch::Processes, 8, placed(2), [&](RankContext& ctx) -> std::string {
    for (int split = 0; split < 2; ++split) {
      const int color = split == 0 ? ctx.rank % 2 : ctx.rank / 4;
      const int key = split == 0 ? ctx.rank : -ctx.rank;
      loomComm_t sub = nullptr;
      LT_CALL(ctx.comm, loomCommSplit(ctx.comm, color, key, &sub, nullptr));
      RankContext subCtx = ctx;
      subCtx.comm = sub;
      LT_CALL(sub, loomCommUserRank(sub, &subCtx.rank));
      LT_CALL(sub, loomCommCount(sub, &subCtx.nranks));
      if (subCtx.nranks != 4) return "split " + std::to_string(split) + " has " + std::to_string(subCtx.nranks) + " ranks";
      std::string f = runCases(subCtx, cases);
      if (subCtx.comm) LT_CALL(sub, loomCommDestroy(sub));
      if (!f.empty()) return "split " + std::to_string(split) + ": " + f;
    }
    return "";
  });
  EXPECT_TRUE(failures.empty()) << failures;
}

// One group per round: every rank sends every other rank a message whose size depends on the pair
// (0 included), and receives theirs; checked byte by byte.
std::string groupedExchange(RankContext& ctx) {
  constexpr size_t kSizes[] = {0, 1, 4099, 65537, 300001};
  auto bytesFor = [&](int src, int dst, int round) { return kSizes[(src * 3 + dst * 5 + round) % std::size(kSizes)]; };
  auto byteAt = [](int src, int dst, int round, size_t i) {
    return static_cast<uint8_t>((src * 131 + dst * 31 + round * 7 + i * 13) ^ (i >> 8));
  };
  for (int round = 0; round < 3; ++round) {
    std::vector<std::unique_ptr<GuardedBuffer>> sends(ctx.nranks), recvs(ctx.nranks);
    LT_CALL(ctx.comm, loomGroupStart());
    for (int p = 0; p < ctx.nranks; ++p) {
      sends[p] = std::make_unique<GuardedBuffer>(bytesFor(ctx.rank, p, round), round);
      recvs[p] = std::make_unique<GuardedBuffer>(bytesFor(p, ctx.rank, round), round + 100);
      for (size_t i = 0; i < sends[p]->size(); ++i) sends[p]->data()[i] = byteAt(ctx.rank, p, round, i);
      LT_CALL(ctx.comm, loomRecv(recvs[p]->data(), recvs[p]->size(), loomUint8, p, ctx.comm, nullptr));
      LT_CALL(ctx.comm, loomSend(sends[p]->data(), sends[p]->size(), loomUint8, p, ctx.comm, nullptr));
    }
    LT_CALL(ctx.comm, loomGroupEnd());
    for (int p = 0; p < ctx.nranks; ++p) {
      for (size_t i = 0; i < recvs[p]->size(); ++i)
        if (recvs[p]->data()[i] != byteAt(p, ctx.rank, round, i))
          return "round " + std::to_string(round) + ": byte " + std::to_string(i) + " from rank " + std::to_string(p) +
                 " is wrong";
      std::string g = recvs[p]->checkGuards("receive from rank " + std::to_string(p));
      if (g.empty()) g = sends[p]->checkGuards("send to rank " + std::to_string(p));
      if (!g.empty()) return g;
    }
  }
  return "";
}

TEST_F(Hosts, GroupedSendRecvAcrossHosts) {
  std::string failures = runRanks(Launch::Processes, 4, placed(2), groupedExchange);
  EXPECT_TRUE(failures.empty()) << "2 hosts x 2:\n" << failures;
  failures = runRanks(Launch::Processes, 4, placed(1), groupedExchange);
  EXPECT_TRUE(failures.empty()) << "4 hosts x 1:\n" << failures;
}

// A nonblocking communicator's progress thread moves a large allreduce across hosts while the caller
// computes and never drives Loom: the operation ends while the caller computes.
TEST_F(Hosts, NonblockingProgressesWhileTheCallerComputes) {
  const std::string failures = runRanksRaw(Launch::Processes, 2, placed(1), [](RankContext& ctx) -> std::string {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.blocking = 0;
    loomComm_t comm = nullptr;
    LT_CALL(nullptr, loomCommInitRankConfig(&comm, ctx.nranks, ctx.id, ctx.rank, &config));
    ctx.comm = comm;
    const size_t count = 8u << 20;  // 32 MiB
    std::vector<float> data(count, static_cast<float>(ctx.rank + 1));
    loomResult_t r = loomAllReduce(data.data(), data.data(), count, loomFloat32, loomSum, comm, nullptr);
    if (r != loomSuccess && r != loomInProgress) return callFailure("loomAllReduce", r, comm);
    uint64_t op = 0;
    LT_CALL(comm, loomCommLastOpId(comm, &op));
    // "Compute" in 50 ms slices, looking between them with loomCommWaitOp(0 ms), which only reads the
    // engine's state: the operation can only end through the progress thread. Unloaded it takes some
    // 20 ms; on a loaded CI machine well over a second, so the bound is generous.
    const auto giveUp = Clock::now() + std::chrono::seconds(30);
    volatile double sink = 0;
    for (;;) {
      const auto sliceEnd = Clock::now() + std::chrono::milliseconds(50);
      while (Clock::now() < sliceEnd) sink = sink + 1;
      r = loomCommWaitOp(comm, op, 0);
      if (r != loomInProgress) break;
      if (Clock::now() > giveUp) break;
    }
    if (r != loomSuccess) {
      // The buffer must outlive the operation even when the test fails: how late did it end?
      std::string failure = callFailure("loomCommWaitOp(0 ms) while computing for 30 s", r, comm);
      r = loomCommWaitOp(comm, op, 60000);
      return failure + " (then waiting up to 60 s returned " + std::to_string(r) + ")";
    }
    for (size_t i = 0; i < count; i += 4099)
      if (data[i] != 3.0f) return "element " + std::to_string(i) + " is " + std::to_string(data[i]);
    LT_CALL(comm, loomCommDestroy(comm));
    ctx.comm = nullptr;
    return "";
  });
  EXPECT_TRUE(failures.empty()) << failures;
}

// Every link delays frames by 1 ms and drops 0.1% of them (tc netem, or hosts.sh's user-space switch
// where the kernel has no netem): slower, never wrong. A bed of its own, 2 hosts x 2 ranks.
TEST_F(Hosts, DelayAndLossOnTheLinks) {
  std::string why;
  bool unsupported = false;
  std::unique_ptr<HostBed> impaired = HostBed::create(2, "delay 1ms loss 0.1%", &why, &unsupported);
  ASSERT_NE(impaired, nullptr) << why;
  const std::vector<Case> cases =
      buildCases({.colls = {Coll::AllReduce, Coll::Broadcast, Coll::AllGather, Coll::ReduceScatter, Coll::SendRecv},
                  .dtypes = {loomFloat32, loomInt32},
                  .ops = {Op::Sum, Op::Max},
                  .counts = {1, 65537, (1u << 20) + 3},
                  .crossDtypeOp = false},
                 4);
  RunOptions options;
  options.timeoutSec = 600;
  options.placeRank = [&](int rank) { return impaired->enter(rank / 2); };
  const std::string failures =
      runRanks(Launch::Processes, 4, options, [&](RankContext& ctx) { return runCases(ctx, cases); });
  EXPECT_TRUE(failures.empty()) << failures;
}

// When a fault happened, and which ranks were ready for it (in their collective loop), for the
// processes of a test (steady_clock is one clock for all of them; each mark is a file).
class FaultClock {
 public:
  FaultClock() : path_("/tmp/loom-fault-" + std::to_string(getpid()) + "-" + std::to_string(counter_++)) {
    removeMarks();
  }
  ~FaultClock() { removeMarks(); }
  // `rank` finished an operation: its communicator is up, so a fault now is a fault mid-collective.
  void markReady(int rank) const { std::ofstream(readyPath(rank)) << 1; }
  // Waits up to `limit` for ranks 0..nranks-1 to be ready; false when some never were.
  bool waitForReady(int nranks, std::chrono::seconds limit) const {
    const auto until = Clock::now() + limit;
    for (int r = 0; r < nranks; ++r)
      while (!std::ifstream(readyPath(r))) {
        if (Clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    return true;
  }
  void markNow() const {
    std::ofstream(path_ + ".tmp") << Clock::now().time_since_epoch().count();
    std::rename((path_ + ".tmp").c_str(), path_.c_str());
  }
  // Seconds since the fault, waiting up to 5 s for it to be marked; < 0 when it never was.
  double secondsSinceFault() const {
    for (int i = 0; i < 500; ++i) {
      std::ifstream in(path_);
      Clock::rep at = 0;
      if (in >> at) return std::chrono::duration<double>(Clock::now() - Clock::time_point(Clock::duration(at))).count();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

 private:
  std::string readyPath(int rank) const { return path_ + ".ready." + std::to_string(rank); }
  void removeMarks() const {
    std::remove(path_.c_str());
    for (int r = 0; r < kMaxRanks; ++r) std::remove(readyPath(r).c_str());
  }
  static constexpr int kMaxRanks = 16;  // more than any fault test runs
  static inline int counter_ = 0;
  std::string path_;
};

// A surviving rank loops on allreduces until the fault stops it: it must fail with loomRemoteError or
// loomTimeout naming one of `culprits` (any rank when empty), within LOOM_TIMEOUT_MS of the fault
// (plus the grace a timed-out rank listens for its peers' notices, the half second it gives the job's
// hang report, and a margin for a loaded machine).
std::string expectFaultReported(RankContext& ctx, const FaultClock& fault, const std::set<int>& culprits,
                                bool keepComm = false) {
  const size_t count = 1u << 20;
  std::vector<float> buf(count, 1.0f);
  const auto start = Clock::now();
  loomResult_t res = loomSuccess;
  for (bool first = true; res == loomSuccess && Clock::now() - start < std::chrono::seconds(60); first = false) {
    res = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, ctx.comm, nullptr);
    if (first && res == loomSuccess) fault.markReady(ctx.rank);
  }
  const double sinceFault = fault.secondsSinceFault();
  const std::string error = loomGetLastError(ctx.comm);
  if (!keepComm) {
    loomCommAbort(ctx.comm);
    ctx.comm = nullptr;
  }
  if (res != loomRemoteError && res != loomTimeout)
    return "expected loomRemoteError or loomTimeout, got " + std::to_string(res) + ": " + error;
  if (sinceFault < 0) return "failed before the fault (or the fault never happened): " + error;
  const double limit = kFaultTimeoutMs / 1000.0 + 3.0;
  if (sinceFault > limit)
    return "reported " + std::to_string(sinceFault) + " s after the fault (limit " + std::to_string(limit) + " s): " + error;
  if (culprits.empty()) return "";
  for (int c : culprits)
    if (error.find("rank " + std::to_string(c)) != std::string::npos) return "";
  return "the error names none of the failed ranks: " + error;
}

// Forks the saboteur (before the ranks: the test process must stay single-threaded): once the 4 ranks
// are in their loops (not a fixed delay: a loaded machine may still be in init, where a cut link is
// another test), and a little into them, it takes `host`'s link down and marks the fault.
pid_t cutLinkOnceReady(const HostBed& bed, const FaultClock& fault, int host) {
  const pid_t saboteur = fork();
  if (saboteur == 0) {
    if (!fault.waitForReady(4, std::chrono::seconds(60))) _exit(2);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const bool down = bed.setLink(host, false).empty();
    fault.markNow();
    _exit(down ? 0 : 1);
  }
  return saboteur;
}

// Waits for the saboteur and brings the link back.
void restoreLink(const HostBed& bed, pid_t saboteur, int host) {
  int status = 0;
  waitpid(saboteur, &status, 0);
  EXPECT_EQ(bed.setLink(host, true), "");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFEXITED(status) && WEXITSTATUS(status) == 2 ? "the ranks never all finished an allreduce"
                                                         : "taking the link down failed");
}

// In a rank process: marks the fault and kills the process with SIGKILL 1.5 s from now.
void killThisRankSoon(const FaultClock& fault) {
  std::thread([&fault] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    fault.markNow();
    raise(SIGKILL);
  }).detach();
}

// The failures other than rank `victim`'s death by SIGKILL (*victimSeen: that one was there).
std::string otherThanKilled(const std::string& failures, int victim, bool* victimSeen = nullptr) {
  std::istringstream lines(failures);
  std::string line, others;
  const std::string prefix = "rank " + std::to_string(victim) + ":";
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) == 0 && line.find("signal 9") != std::string::npos) {
      if (victimSeen) *victimSeen = true;
    } else if (!line.empty()) {
      others += line + "\n";
    }
  }
  return others;
}

// Host 3's link goes down while 4 ranks (one per host) loop on allreduces: the ranks that can still
// talk must name a rank of the cut host; the cut rank must fail too (naming whom it waited for).
TEST_F(Hosts, LinkDownMidCollective) {
  setenv("LOOM_TIMEOUT_MS", std::to_string(kFaultTimeoutMs).c_str(), 1);
  const FaultClock fault;
  const pid_t saboteur = cutLinkOnceReady(*bed_, fault, 2);
  const std::string failures = runRanks(Launch::Processes, 4, placed(1, 120), [&](RankContext& ctx) {
    return expectFaultReported(ctx, fault, ctx.rank == 2 ? std::set<int>{} : std::set<int>{2});
  });
  restoreLink(*bed_, saboteur, 2);
  unsetenv("LOOM_TIMEOUT_MS");
  EXPECT_TRUE(failures.empty()) << failures;
}

// Rank 2 (host 2 of 2 x 2) is killed mid-collective: every other rank names it.
TEST_F(Hosts, RankKilledMidCollective) {
  setenv("LOOM_TIMEOUT_MS", std::to_string(kFaultTimeoutMs).c_str(), 1);
  const FaultClock fault;
  const std::string failures = runRanks(Launch::Processes, 4, placed(2, 120), [&](RankContext& ctx) -> std::string {
    if (ctx.rank == 2) killThisRankSoon(fault);
    return expectFaultReported(ctx, fault, {2});
  });
  unsetenv("LOOM_TIMEOUT_MS");
  // The killed rank is the only one reported, as killed.
  bool victimSeen = false;
  const std::string others = otherThanKilled(failures, 2, &victimSeen);
  EXPECT_TRUE(victimSeen) << failures;
  EXPECT_TRUE(others.empty()) << others;
}

// After a fault: the ranks left shrink without `lost` (revoking what was in flight) and check an
// allreduce on the smaller communicator, element by element; the parent is aborted.
// The smaller communicator's timeout is generous: the fault's short one (kFaultTimeoutMs, how soon a cut
// link is noticed) would also bound making it, which a loaded machine's UCX set-up can outlast.
std::string shrinkAndGoOn(RankContext& ctx, std::vector<int> lost) {
  loomComm_t smaller = nullptr;
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutMs = 60000;
  const loomResult_t res = loomCommShrink(ctx.comm, lost.data(), static_cast<int>(lost.size()), &smaller, &config,
                                          LOOM_SHRINK_ABORT);
  std::string problem = res == loomSuccess ? "" : std::string("loomCommShrink: ") + loomGetLastError(ctx.comm);
  loomCommAbort(ctx.comm);
  ctx.comm = nullptr;
  if (!problem.empty()) return problem;
  int n = 0, rank = -1;
  loomCommCount(smaller, &n);
  loomCommUserRank(smaller, &rank);
  const size_t count = 1003;
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((rank + 1) * (i % 5 + 1));
  if (loomAllReduce(v.data(), v.data(), count, loomFloat32, loomSum, smaller, nullptr) != loomSuccess)
    problem = std::string("allreduce after shrinking: ") + loomGetLastError(smaller);
  for (size_t i = 0; i < count && problem.empty(); ++i)
    if (v[i] != static_cast<float>(n * (n + 1) / 2 * (i % 5 + 1)))
      problem = "allreduce after shrinking: element " + std::to_string(i) + " is " + std::to_string(v[i]);
  loomCommDestroy(smaller);
  return problem;
}

// Rank 2 (host 2 of 2 x 2) is killed mid-collective; the other three shrink without it and go on.
TEST_F(Hosts, ShrinkAfterARankOnAnotherHostIsKilled) {
  setenv("LOOM_TIMEOUT_MS", std::to_string(kFaultTimeoutMs).c_str(), 1);
  const FaultClock fault;
  const std::string failures = runRanks(Launch::Processes, 4, placed(2, 120), [&](RankContext& ctx) -> std::string {
    if (ctx.rank == 2) killThisRankSoon(fault);
    if (std::string e = expectFaultReported(ctx, fault, {2}, true); !e.empty()) return e;
    return shrinkAndGoOn(ctx, {2});
  });
  unsetenv("LOOM_TIMEOUT_MS");
  const std::string others = otherThanKilled(failures, 2);
  EXPECT_TRUE(others.empty()) << others;
}

// Host 2's link goes down (4 hosts, one rank each): the three ranks that can still talk shrink without
// rank 2 and go on; the cut rank fails on its own.
TEST_F(Hosts, ShrinkAfterAHostsLinkGoesDown) {
  setenv("LOOM_TIMEOUT_MS", std::to_string(kFaultTimeoutMs).c_str(), 1);
  const FaultClock fault;
  const pid_t saboteur = cutLinkOnceReady(*bed_, fault, 2);
  const std::string failures = runRanks(Launch::Processes, 4, placed(1, 120), [&](RankContext& ctx) {
    if (ctx.rank == 2) return expectFaultReported(ctx, fault, {});
    if (std::string e = expectFaultReported(ctx, fault, {2}, true); !e.empty()) return e;
    return shrinkAndGoOn(ctx, {2});
  });
  restoreLink(*bed_, saboteur, 2);
  unsetenv("LOOM_TIMEOUT_MS");
  EXPECT_TRUE(failures.empty()) << failures;
}

// The TCP ports listening on this host (its /proc/net/tcp: the network namespace of the reader).
std::vector<int> listeningPorts() {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::vector<int> ports;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A") ports.push_back(std::stoi(local.substr(local.find(':') + 1), nullptr, 16));
  }
  return ports;
}

// One stranger's visit to a port: connect, then junk, a forged hello of the socket provider's shape,
// or nothing at all, and leave.
void visit(int port, unsigned kind) {
  loom::SocketAddress addr;
  if (!loom::parseSocketAddress("192.168.77.1:" + std::to_string(port), &addr).ok()) return;
  loom::Socket s;
  if (!loom::connectTo(addr, loom::Deadline::afterMs(200), nullptr, &s).ok()) return;
  std::vector<char> bytes;
  if (kind % 3 == 0) {
    bytes.resize(300);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 37 + kind);
  } else if (kind % 3 == 1) {
    const uint32_t forged[6] = {0x4f4c4548, 1, 0xdead, 0xbeef, 0xffffffff, 1};  // "HELO", wrong secret
    bytes.assign(reinterpret_cast<const char*>(forged), reinterpret_cast<const char*>(forged) + sizeof forged);
  }
  if (!bytes.empty()) (void)loom::sendAll(s, bytes.data(), bytes.size(), loom::Deadline::afterMs(200), nullptr);
}

// Strangers on host 1 connect to every listening port of that host (the bootstrap's and the network
// provider's) again and again while the ranks set up and run: junk, silence, forged hellos. The
// collectives must not notice. (The provider-level tests, tests/net, aim junk at a listen comm
// deterministically; here the ports are found as a scanner would find them.)
TEST_F(Hosts, JunkSentToThePortsOfAHost) {
  const pid_t stranger = fork();
  if (stranger == 0) {
    if (!bed_->enter(0).empty()) _exit(1);
    for (unsigned visitNo = 0;; ++visitNo) {
      for (int port : listeningPorts()) visit(port, visitNo++);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  expectCasesPass(2, 1,
                  {{.colls = {Coll::AllReduce, Coll::AllGather, Coll::SendRecv},
                    .dtypes = {loomFloat32},
                    .ops = {Op::Sum},
                    .counts = {1, 65537},
                    .crossDtypeOp = false}});
  kill(stranger, SIGKILL);
  waitpid(stranger, nullptr, 0);
}

// loom-doctor, run on the test's host while host 3's link is down and its rank is stuck in compute
// before collective #2: the process it asks gathers the states across hosts and names rank 2
// unreachable and the others waiting in #2. Once the link is back the job finishes #2: asking
// disturbed nothing. (States travel over TCP whatever the provider: run with the socket one only.)
TEST_F(Hosts, DoctorNamesARankBehindADownLink) {
  const char* exe = std::getenv("LOOM_DOCTOR_EXE");
  const char* net = std::getenv("LOOM_TEST_NET");
  if (net && std::string(net) != "socket") GTEST_SKIP() << "the state exchange is the same TCP for every provider";
  if (!exe) GTEST_SKIP() << "no loom-doctor (built without CLI11)";
  char tmpl[] = "/tmp/loom-doctor-hosts-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string sockets = dir + "/sockets", answer = dir + "/doctor.json";
  setenv("LOOM_DOCTOR_DIR", sockets.c_str(), 1);
  const FaultClock asked;  // ready: a rank warmed up; the mark: the doctor has answered
  const pid_t asker = fork();  // before the ranks: the test process must stay single-threaded
  if (asker == 0) {
    if (!asked.waitForReady(4, std::chrono::seconds(60))) _exit(2);
    // Until ranks 0, 1 and 3 are in #2, as the doctor sees them (all reachable yet: a quick answer).
    bool inTwo = false;
    for (int i = 0; i < 300 && !inTwo; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const std::string cmd = std::string(exe) + " --list --json --dir " + sockets + " > " + answer;
      if (std::system(cmd.c_str()) != 0) continue;
      std::ifstream listed(answer);
      const nlohmann::json list = nlohmann::json::parse(listed, nullptr, false);
      int entered = 0;
      for (const auto& p : list.is_discarded() ? nlohmann::json::array() : list)
        for (const auto& c : p["comms"]) entered += c["rank"] != 2 && c["last_issued"] == 2;
      inTwo = entered == 3;
    }
    if (!inTwo) _exit(5);
    if (!bed_->setLink(2, false).empty()) _exit(3);
    const int rc = std::system((std::string(exe) + " --json --dir " + sockets + " > " + answer).c_str());
    const bool up = bed_->setLink(2, true).empty();
    asked.markNow();
    _exit(rc == 0 && up ? 0 : 4);
  }
  const std::string failures = runRanks(Launch::Processes, 4, placed(1, 120), [&](RankContext& ctx) -> std::string {
    std::vector<float> v(1000, 1.0f);
    for (int op = 0; op < 2; ++op) {
      if (op == 1) asked.markReady(ctx.rank);
      // Stuck in compute until the doctor answered (secondsSinceFault waits 5 s per call).
      for (int i = 0; op == 1 && ctx.rank == 2 && i < 20 && asked.secondsSinceFault() < 0; ++i) {
      }
      if (loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, loomSum, ctx.comm, nullptr) != loomSuccess)
        return "allreduce #" + std::to_string(op + 1) + ": " + loomGetLastError(ctx.comm);
    }
    return v[999] == 16.0f ? "" : "allreduce #2 gave " + std::to_string(v[999]);
  });
  unsetenv("LOOM_DOCTOR_DIR");
  int status = 0;
  waitpid(asker, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the asker ended with " << status;
  EXPECT_TRUE(failures.empty()) << failures;
  std::ifstream in(answer);
  std::stringstream text;
  text << in.rdbuf();
  std::system(("rm -rf '" + dir + "'").c_str());
  nlohmann::json reports;
  try {
    reports = nlohmann::json::parse(text.str());
  } catch (const std::exception& e) {
    FAIL() << "loom-doctor printed no JSON (" << e.what() << "): " << text.str();
  }
  ASSERT_EQ(reports.size(), 1u) << text.str();
  const nlohmann::json& report = reports[0]["report"];
  EXPECT_EQ(report["unreachable"], nlohmann::json::array({2})) << text.str();
  EXPECT_EQ(report["oldest_unfinished"]["seq"], 2) << text.str();
  EXPECT_EQ(report["oldest_unfinished"]["waiting"], nlohmann::json::array({0, 1, 3})) << text.str();
  EXPECT_NE(reports[0]["text"].get<std::string>().find("UNREACHABLE: 2"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace loomtest
