// Grouped point-to-point and grouped collectives: rings in both directions, all-pairs exchanges with a
// different size (and dtype) per pair including send-to-self, several messages to one peer in one
// group, nested groups, ordered ungrouped send/recv, receives from any source, several collectives in
// one group, and one thread driving every communicator of loomCommInitAll inside one group.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "buffers.h"
#include "cases.h"
#include "launch_config.h"

namespace loomtest {
namespace {

constexpr size_t kPairCounts[] = {0, 1, 3, 17, 1000, 4099, 65537};

size_t pairCount(int src, int dst, int round) {
  return kPairCounts[(src * 3 + dst * 5 + round) % std::size(kPairCounts)];
}
loomDataType_t pairDtype(int src, int dst) { return kAllDtypes[(src * 7 + dst) % std::size(kAllDtypes)]; }
uint64_t pairSeed(uint64_t base, int src, int dst, int msg) {
  return mix64(base ^ (static_cast<uint64_t>(src) << 32) ^ (static_cast<uint64_t>(dst) << 16) ^ msg);
}

// One message this rank sends or receives, with its buffer.
struct Message {
  int peer;
  size_t count;
  loomDataType_t dtype;
  uint64_t seed;
  int src;  // the rank whose pattern the message carries
  std::unique_ptr<GuardedBuffer> buf;
  std::vector<uint8_t> before;  // sends: contents before the group
};

Message makeSend(int me, int peer, size_t count, loomDataType_t dt, uint64_t seed) {
  Message m{peer, count, dt, seed, me, std::make_unique<GuardedBuffer>(count * dtypeSize(dt), seed), {}};
  fillPattern(m.buf->data(), m.buf->size(), seed, me, 0);
  m.before.assign(m.buf->data(), m.buf->data() + m.buf->size());
  return m;
}

Message makeRecv(int peer, size_t count, loomDataType_t dt, uint64_t seed) {
  return Message{peer, count, dt, seed, peer, std::make_unique<GuardedBuffer>(count * dtypeSize(dt), seed + 1), {}};
}

std::string checkMessages(const std::vector<Message>& sends, const std::vector<Message>& recvs, const std::string& label) {
  std::string out;
  for (const Message& m : recvs) {
    size_t bad = 0;
    size_t at = findPatternMismatch(m.buf->data(), m.buf->size(), m.seed, m.src, 0, &bad);
    std::string what = label + " recv of " + std::to_string(m.count) + " " + dtypeName(m.dtype) + " from rank " +
                       std::to_string(m.peer);
    if (at != SIZE_MAX)
      out += what + ": element " + std::to_string(at / dtypeSize(m.dtype)) + " wrong (" + std::to_string(bad) +
             " bytes differ); ";
    std::string g = m.buf->checkGuards(what);
    if (!g.empty()) out += g + "; ";
  }
  for (const Message& m : sends) {
    std::string what = label + " send of " + std::to_string(m.count) + " to rank " + std::to_string(m.peer);
    if (!m.before.empty() && std::memcmp(m.before.data(), m.buf->data(), m.before.size()) != 0)
      out += what + ": send buffer modified; ";
    std::string g = m.buf->checkGuards(what);
    if (!g.empty()) out += g + "; ";
  }
  return out;
}

// Posts all sends then all recvs (or the reverse) inside one group.
std::string exchangeInGroup(loomComm_t comm, std::vector<Message>& sends, std::vector<Message>& recvs,
                            bool recvsFirst) {
  LT_CALL(comm, loomGroupStart());
  loomResult_t bad = loomSuccess;
  std::string what;
  auto post = [&](bool doRecvs) {
    for (Message& m : doRecvs ? recvs : sends) {
      loomResult_t r = doRecvs ? loomRecv(m.buf->data(), m.count, m.dtype, m.peer, comm, nullptr)
                               : loomSend(m.buf->data(), m.count, m.dtype, m.peer, comm, nullptr);
      if (r != loomSuccess && bad == loomSuccess) {
        bad = r;
        what = std::string(doRecvs ? "loomRecv" : "loomSend") + " from/to " + std::to_string(m.peer) + " in group";
      }
    }
  };
  post(recvsFirst);
  post(!recvsFirst);
  loomResult_t end = loomGroupEnd();
  if (bad != loomSuccess) return callFailure(what.c_str(), bad, comm);
  if (end != loomSuccess) return callFailure("loomGroupEnd", end, comm);
  return "";
}

class Group : public ::testing::TestWithParam<RanksParam> {
 protected:
  void run(const RankBody& body) {
    RunOptions options;
    options.transport = GetParam().transport;
    options.timeoutSec = 300;
    std::string failures = runRanks(testLaunch(), GetParam().nranks, options, body);
    EXPECT_TRUE(failures.empty()) << failures;
  }
};

// Every rank sends to every rank (itself included) a message whose size and dtype depend on the pair,
// all in one group; several rounds with the sizes shifted, alternating the posting order.
TEST_P(Group, AllPairsDifferentSizes) {
  run([](RankContext& ctx) -> std::string {
    for (int round = 0; round < 4; ++round) {
      ctx.note("all-pairs round " + std::to_string(round));
      std::vector<Message> sends, recvs;
      for (int p = 0; p < ctx.nranks; ++p) {
        sends.push_back(makeSend(ctx.rank, p, pairCount(ctx.rank, p, round), pairDtype(ctx.rank, p),
                                 pairSeed(round, ctx.rank, p, 0)));
        recvs.push_back(makeRecv(p, pairCount(p, ctx.rank, round), pairDtype(p, ctx.rank), pairSeed(round, p, ctx.rank, 0)));
      }
      std::string f = exchangeInGroup(ctx.comm, sends, recvs, round % 2 == 1);
      if (!f.empty()) return "round " + std::to_string(round) + ": " + f;
      f = checkMessages(sends, recvs, "all-pairs round " + std::to_string(round));
      if (!f.empty()) return f;
    }
    return "";
  });
}

// Send to both neighbours and receive from both, with different sizes each way, 10 rounds.
TEST_P(Group, RingBothDirections) {
  run([](RankContext& ctx) -> std::string {
    const int n = ctx.nranks, next = (ctx.rank + 1) % n, prev = (ctx.rank + n - 1) % n;
    for (int round = 0; round < 10; ++round) {
      ctx.note("ring round " + std::to_string(round));
      auto countOf = [&](int src, int dir) { return pairCount(src, dir, round) + static_cast<size_t>(dir); };
      std::vector<Message> sends, recvs;
      sends.push_back(makeSend(ctx.rank, next, countOf(ctx.rank, 0), loomFloat32, pairSeed(round, ctx.rank, 0, 1)));
      sends.push_back(makeSend(ctx.rank, prev, countOf(ctx.rank, 1), loomUint8, pairSeed(round, ctx.rank, 1, 2)));
      recvs.push_back(makeRecv(prev, countOf(prev, 0), loomFloat32, pairSeed(round, prev, 0, 1)));
      recvs.push_back(makeRecv(next, countOf(next, 1), loomUint8, pairSeed(round, next, 1, 2)));
      // With one or two ranks, next == prev: the two messages to that peer are told apart by order
      // (NCCL matches sends and recvs to one peer in posting order), so post in matching orders.
      std::string f = exchangeInGroup(ctx.comm, sends, recvs, round % 2 == 0);
      if (!f.empty()) return "round " + std::to_string(round) + ": " + f;
      f = checkMessages(sends, recvs, "ring round " + std::to_string(round));
      if (!f.empty()) return f;
    }
    return "";
  });
}

// Three messages to the same peer in one group are matched in posting order.
TEST_P(Group, SeveralMessagesToOnePeerMatchInOrder) {
  run([](RankContext& ctx) -> std::string {
    const int n = ctx.nranks, next = (ctx.rank + 1) % n, prev = (ctx.rank + n - 1) % n;
    const size_t counts[] = {5, 70000, 1};
    std::vector<Message> sends, recvs;
    for (int k = 0; k < 3; ++k) {
      sends.push_back(makeSend(ctx.rank, next, counts[k], loomInt32, pairSeed(7, ctx.rank, next, k)));
      recvs.push_back(makeRecv(prev, counts[k], loomInt32, pairSeed(7, prev, ctx.rank, k)));
    }
    std::string f = exchangeInGroup(ctx.comm, sends, recvs, false);
    if (!f.empty()) return f;
    return checkMessages(sends, recvs, "in-order");
  });
}

// Nested loomGroupStart/End: the exchange happens at the outermost End.
TEST_P(Group, NestedGroups) {
  run([](RankContext& ctx) -> std::string {
    const int n = ctx.nranks, next = (ctx.rank + 1) % n, prev = (ctx.rank + n - 1) % n;
    std::vector<Message> sends, recvs;
    sends.push_back(makeSend(ctx.rank, next, 1000, loomFloat64, pairSeed(9, ctx.rank, next, 0)));
    recvs.push_back(makeRecv(prev, 1000, loomFloat64, pairSeed(9, prev, ctx.rank, 0)));
    LT_CALL(ctx.comm, loomGroupStart());
    std::string f = exchangeInGroup(ctx.comm, sends, recvs, false);  // inner group
    LT_CALL(ctx.comm, loomGroupEnd());
    if (!f.empty()) return f;
    return checkMessages(sends, recvs, "nested");
  });
}

// Without a group: pairs (2k, 2k+1); the even rank sends then receives, the odd one receives then
// sends (valid for NCCL; never both sending first). A rank without partner sends to itself in a group.
TEST_P(Group, UngroupedOrderedSendRecv) {
  run([](RankContext& ctx) -> std::string {
    const int partner = ctx.rank ^ 1;
    const size_t count = 65537;
    Message send = makeSend(ctx.rank, partner, count, loomBfloat16, pairSeed(11, ctx.rank, partner, 0));
    Message recv = makeRecv(partner, count, loomBfloat16, pairSeed(11, partner, ctx.rank, 0));
    if (partner >= ctx.nranks) {
      std::vector<Message> s, r;
      s.push_back(makeSend(ctx.rank, ctx.rank, count, loomBfloat16, pairSeed(11, ctx.rank, ctx.rank, 0)));
      r.push_back(makeRecv(ctx.rank, count, loomBfloat16, pairSeed(11, ctx.rank, ctx.rank, 0)));
      std::string f = exchangeInGroup(ctx.comm, s, r, false);
      return f.empty() ? checkMessages(s, r, "self") : f;
    }
    if (ctx.rank % 2 == 0) {
      LT_CALL(ctx.comm, loomSend(send.buf->data(), count, loomBfloat16, partner, ctx.comm, nullptr));
      LT_CALL(ctx.comm, loomRecv(recv.buf->data(), count, loomBfloat16, partner, ctx.comm, nullptr));
    } else {
      LT_CALL(ctx.comm, loomRecv(recv.buf->data(), count, loomBfloat16, partner, ctx.comm, nullptr));
      LT_CALL(ctx.comm, loomSend(send.buf->data(), count, loomBfloat16, partner, ctx.comm, nullptr));
    }
    std::vector<Message> s, r;
    s.push_back(std::move(send));
    r.push_back(std::move(recv));
    return checkMessages(s, r, "ungrouped");
  });
}

// loomRecvAny: rank 0 takes one message of every other rank, in whatever order they arrive, and each
// names its sender; messages span several FIFO slots, so every piece must come from that sender. Each
// rank sends two messages: from one sender they arrive in order. Refusals: NULL source, no elements,
// and another receive in its group.
TEST_P(Group, ReceiveFromAnySource) {
  run([](RankContext& ctx) -> std::string {
    const size_t count = 100003;  // several 256 KiB slots of floats
    std::vector<Message> sends;
    for (int round = 0; round < 2 && ctx.rank != 0; ++round)
      sends.push_back(makeSend(ctx.rank, 0, count, loomFloat32, pairSeed(21 + round, ctx.rank, 0, round)));
    if (ctx.rank != 0) {
      for (Message& m : sends) LT_CALL(ctx.comm, loomSend(m.buf->data(), count, loomFloat32, 0, ctx.comm, nullptr));
      return "";
    }
    // 2 messages per sender, taken in any order across senders but in order from each one.
    std::vector<int> taken(static_cast<size_t>(ctx.nranks), 0);
    for (int k = 0; k < 2 * (ctx.nranks - 1); ++k) {
      Message got = makeRecv(-1, count, loomFloat32, 0);
      int source = -1;
      LT_CALL(ctx.comm, loomRecvAny(got.buf->data(), count, loomFloat32, &source, ctx.comm, nullptr));
      if (source < 1 || source >= ctx.nranks || taken[static_cast<size_t>(source)] >= 2)
        return "receive " + std::to_string(k) + ": loomRecvAny named source " + std::to_string(source);
      const int round = taken[static_cast<size_t>(source)]++;
      got.peer = got.src = source;
      got.seed = pairSeed(21 + round, source, 0, round);
      std::vector<Message> recvs;
      recvs.push_back(std::move(got));
      std::string f = checkMessages({}, recvs, "any-source message " + std::to_string(round) + " of rank");
      if (!f.empty()) return f;
    }
    float x = 0;
    int source = 0;
    if (loomRecvAny(&x, 1, loomFloat32, nullptr, ctx.comm, nullptr) != loomInvalidArgument)
      return "loomRecvAny with a NULL source was not refused";
    if (loomRecvAny(&x, 0, loomFloat32, &source, ctx.comm, nullptr) != loomInvalidArgument)
      return "loomRecvAny of 0 elements was not refused";
    if (ctx.nranks > 1) {
      float y = 0;
      LT_CALL(ctx.comm, loomGroupStart());
      LT_CALL(ctx.comm, loomRecvAny(&x, 1, loomFloat32, &source, ctx.comm, nullptr));
      LT_CALL(ctx.comm, loomRecv(&y, 1, loomFloat32, 1, ctx.comm, nullptr));
      const loomResult_t r = loomGroupEnd();
      const std::string text = loomGetLastError(nullptr);  // a group's error is the thread's
      if (r != loomInvalidArgument || text.find("only receive") == std::string::npos)
        return "a group with loomRecvAny and another receive returned " + std::to_string(r) + ": " + text;
    }
    return "";
  });
}

// A receive from any source never takes a collective's message: rank 0 waits for rank 1's send,
// which comes late, while every other rank has already entered the allreduce that follows and sent
// rank 0 its part, a message of the same size (a small allreduce sends each rank's whole vector). On
// one channel for both, that message was the first to arrive and was taken as the send.
TEST_P(Group, ReceiveFromAnySourceBesideCollectives) {
  run([](RankContext& ctx) -> std::string {
    if (ctx.nranks < 3) return "";
    const size_t count = 4;
    std::vector<float> mine(count, static_cast<float>(ctx.rank + 1)), sum(count, -1.0f);
    if (ctx.rank == 0) {
      std::vector<float> got(count, -1.0f);
      int source = -1;
      LT_CALL(ctx.comm, loomRecvAny(got.data(), count, loomFloat32, &source, ctx.comm, nullptr));
      if (source != 1 || got[0] != 42.0f || got[count - 1] != 42.0f)
        return "loomRecvAny took a message of rank " + std::to_string(source) + " starting " + std::to_string(got[0]) +
               " (expected rank 1's send of 42)";
    } else if (ctx.rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      std::vector<float> send(count, 42.0f);
      LT_CALL(ctx.comm, loomSend(send.data(), count, loomFloat32, 0, ctx.comm, nullptr));
    }
    LT_CALL(ctx.comm, loomAllReduce(mine.data(), sum.data(), count, loomFloat32, loomSum, ctx.comm, nullptr));
    const float expected = static_cast<float>(ctx.nranks * (ctx.nranks + 1) / 2);
    for (size_t i = 0; i < count; ++i)
      if (sum[i] != expected)
        return "allreduce after the receive: element " + std::to_string(i) + " is " + std::to_string(sum[i]) +
               ", expected " + std::to_string(expected);
    return "";
  });
}

// Several collectives and point-to-point calls in one group, all checked afterwards.
TEST_P(Group, CollectivesInOneGroup) {
  run([](RankContext& ctx) -> std::string {
    const int n = ctx.nranks, rank = ctx.rank;
    loomComm_t comm = ctx.comm;
    const size_t c1 = 1000, c2 = 65537, c3 = 3;
    ReduceInputs arIn{loomFloat32, Op::Sum, n, 101}, rsIn{loomInt32, Op::Max, n, 102};
    GuardedBuffer arSend(c1 * 4), arRecv(c1 * 4), bc(c2), agSend(c3 * 2), agRecv(c3 * 2 * n), rsSend(c1 * 4 * n),
        rsRecv(c1 * 4);
    fillReduceInput(arIn, rank, 0, c1, arSend.data());
    fillReduceInput(rsIn, rank, 0, c1 * n, rsSend.data());
    const int root = n - 1;
    if (rank == root) fillPattern(bc.data(), c2, 103, root, 0);
    fillPattern(agSend.data(), c3 * 2, 104, rank, 0);
    std::vector<Message> sends, recvs;
    sends.push_back(makeSend(rank, (rank + 1) % n, 777, loomUint64, pairSeed(105, rank, 0, 0)));
    recvs.push_back(makeRecv((rank + n - 1) % n, 777, loomUint64, pairSeed(105, (rank + n - 1) % n, 0, 0)));
    LT_CALL(comm, loomGroupStart());
    loomResult_t rs[6] = {
        loomAllReduce(arSend.data(), arRecv.data(), c1, loomFloat32, loomSum, comm, nullptr),
        loomBroadcast(bc.data(), bc.data(), c2, loomUint8, root, comm, nullptr),
        loomAllGather(agSend.data(), agRecv.data(), c3, loomFloat16, comm, nullptr),
        loomReduceScatter(rsSend.data(), rsRecv.data(), c1, loomInt32, loomMax, comm, nullptr),
        loomSend(sends[0].buf->data(), 777, loomUint64, (rank + 1) % n, comm, nullptr),
        loomRecv(recvs[0].buf->data(), 777, loomUint64, (rank + n - 1) % n, comm, nullptr),
    };
    loomResult_t end = loomGroupEnd();
    for (int i = 0; i < 6; ++i)
      if (rs[i] != loomSuccess) return callFailure(("grouped call #" + std::to_string(i)).c_str(), rs[i], comm);
    if (end != loomSuccess) return callFailure("loomGroupEnd", end, comm);
    std::string out;
    auto add = [&](const std::string& what, const std::string& problem) {
      if (!problem.empty()) out += what + ": " + problem + "; ";
    };
    add("grouped allreduce float32 sum 1000", checkReduced(arIn, 0, c1, arRecv.data()));
    size_t bad = 0;
    if (findPatternMismatch(bc.data(), c2, 103, root, 0, &bad) != SIZE_MAX)
      add("grouped broadcast uint8 65537 in place", std::to_string(bad) + " bytes wrong");
    for (int r = 0; r < n; ++r)
      if (findPatternMismatch(agRecv.data() + r * c3 * 2, c3 * 2, 104, r, 0, &bad) != SIZE_MAX)
        add("grouped allgather float16 3", "block " + std::to_string(r) + " wrong");
    add("grouped reducescatter int32 max 1000", checkReduced(rsIn, rank * c1, c1, rsRecv.data()));
    add("grouped send/recv", checkMessages(sends, recvs, "grouped ring"));
    for (auto* b : {&arSend, &arRecv, &bc, &agSend, &agRecv, &rsSend, &rsRecv}) add("guards", b->checkGuards("buffer"));
    return out;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Group, ::testing::ValuesIn(ranksParams()), ranksParamName);

// Thread ranks only (tests/api/meson.build leaves them out of the process runs):
// NCCL's single-process multi-device pattern: one thread owns every communicator of
// loomCommInitAll and drives them all inside one group; then destroys them all.
std::string singleThreadDrivesAll(int n) {
  std::vector<loomComm_t> comms(n, nullptr);
  LT_CALL(nullptr, loomCommInitAll(comms.data(), n, nullptr));
  std::string out;
  for (int i = 0; i < n && out.empty(); ++i) {
    int count = -1, rank = -1, dev = 0;
    LT_CALL(comms[i], loomCommCount(comms[i], &count));
    LT_CALL(comms[i], loomCommUserRank(comms[i], &rank));
    LT_CALL(comms[i], loomCommCuDevice(comms[i], &dev));
    if (count != n || rank != i || dev != -1)
      out = "comms[" + std::to_string(i) + "]: count/rank/device " + std::to_string(count) + "/" + std::to_string(rank) +
            "/" + std::to_string(dev);
  }
  for (size_t count : {size_t{1}, size_t{1000}, size_t{65537}}) {
    if (!out.empty()) break;
    for (Op op : {Op::Sum, Op::Avg, Op::PreMulSum}) {
      for (loomDataType_t dt : {loomFloat32, loomInt8, loomBfloat16}) {
        ReduceInputs in{dt, op, n, mix64(count * 31 + static_cast<int>(op) * 7 + dt)};
        const size_t es = dtypeSize(dt);
        std::vector<std::unique_ptr<GuardedBuffer>> send, recv;
        std::vector<loomRedOp_t> ops(n, loomSum);
        for (int i = 0; i < n; ++i) {
          send.push_back(std::make_unique<GuardedBuffer>(count * es, 1));
          recv.push_back(std::make_unique<GuardedBuffer>(count * es, 2));
          fillReduceInput(in, i, 0, count, send[i]->data());
          if (op == Op::PreMulSum) {
            alignas(8) uint8_t scalar[8];
            preMulScalar(dt, scalar);
            LT_CALL(comms[i], loomRedOpCreatePreMulSum(&ops[i], scalar, dt, loomScalarHostImmediate, comms[i]));
          } else {
            ops[i] = builtinOp(op);
          }
        }
        LT_CALL(nullptr, loomGroupStart());
        loomResult_t first = loomSuccess;
        for (int i = 0; i < n; ++i) {
          loomResult_t r = loomAllReduce(send[i]->data(), recv[i]->data(), count, dt, ops[i], comms[i], nullptr);
          if (first == loomSuccess) first = r;
        }
        loomResult_t end = loomGroupEnd();
        std::string label = std::string("single-thread grouped AllReduce dtype=") + dtypeName(dt) + " op=" + opName(op) +
                            " count=" + std::to_string(count) + " ranks=" + std::to_string(n);
        if (first != loomSuccess) return label + ": " + callFailure("loomAllReduce", first, comms[0]);
        if (end != loomSuccess) return label + ": " + callFailure("loomGroupEnd", end, comms[0]);
        for (int i = 0; i < n; ++i) {
          std::string f = checkReduced(in, 0, count, recv[i]->data());
          if (f.empty()) f = recv[i]->checkGuards("recvbuff");
          if (!f.empty()) out += label + " comm " + std::to_string(i) + ": " + f + "; ";
          if (op == Op::PreMulSum) LT_CALL(comms[i], loomRedOpDestroy(ops[i], comms[i]));
        }
      }
    }
  }
  // Broadcast from the last rank, an all-gather, and a send/recv ring: one group each.
  if (out.empty()) {
    const size_t count = 4099;
    std::vector<std::unique_ptr<GuardedBuffer>> bc, ag, sendB, recvB;
    for (int i = 0; i < n; ++i) {
      bc.push_back(std::make_unique<GuardedBuffer>(count * 2, 3));
      ag.push_back(std::make_unique<GuardedBuffer>(count * n, 4));
      sendB.push_back(std::make_unique<GuardedBuffer>(count * 8, 5));
      recvB.push_back(std::make_unique<GuardedBuffer>(count * 8, 6));
      if (i == n - 1) fillPattern(bc[i]->data(), count * 2, 201, n - 1, 0);
      fillPattern(ag[i]->data() + count * i, count, 202, i, 0);
      fillPattern(sendB[i]->data(), count * 8, 203, i, 0);
    }
    LT_CALL(nullptr, loomGroupStart());
    for (int i = 0; i < n; ++i) LT_CALL(comms[i], loomBroadcast(bc[i]->data(), bc[i]->data(), count, loomFloat16, n - 1, comms[i], nullptr));
    LT_CALL(nullptr, loomGroupEnd());
    LT_CALL(nullptr, loomGroupStart());
    for (int i = 0; i < n; ++i)
      LT_CALL(comms[i], loomAllGather(ag[i]->data() + count * i, ag[i]->data(), count, loomInt8, comms[i], nullptr));
    LT_CALL(nullptr, loomGroupEnd());
    LT_CALL(nullptr, loomGroupStart());
    for (int i = 0; i < n; ++i) {
      LT_CALL(comms[i], loomSend(sendB[i]->data(), count, loomFloat64, (i + 1) % n, comms[i], nullptr));
      LT_CALL(comms[i], loomRecv(recvB[i]->data(), count, loomFloat64, (i + n - 1) % n, comms[i], nullptr));
    }
    LT_CALL(nullptr, loomGroupEnd());
    size_t bad = 0;
    for (int i = 0; i < n; ++i) {
      if (findPatternMismatch(bc[i]->data(), count * 2, 201, n - 1, 0, &bad) != SIZE_MAX)
        out += "single-thread grouped broadcast: comm " + std::to_string(i) + " wrong; ";
      for (int r = 0; r < n; ++r)
        if (findPatternMismatch(ag[i]->data() + count * r, count, 202, r, 0, &bad) != SIZE_MAX)
          out += "single-thread grouped allgather: comm " + std::to_string(i) + " block " + std::to_string(r) + " wrong; ";
      if (findPatternMismatch(recvB[i]->data(), count * 8, 203, (i + n - 1) % n, 0, &bad) != SIZE_MAX)
        out += "single-thread grouped send/recv ring: comm " + std::to_string(i) + " wrong; ";
    }
  }
  for (int i = 0; i < n; ++i) LT_CALL(comms[i], loomCommDestroy(comms[i]));
  return out;
}

class SingleThread : public ::testing::TestWithParam<RanksParam> {};

TEST_P(SingleThread, DrivesAllInitAllCommsInOneGroup) {
  ScopedEnv env("LOOM_TRANSPORT", *GetParam().transport ? GetParam().transport : nullptr);
  // A hang here would block the test binary: run it on a thread with a time limit.
  std::string failures;
  std::atomic<bool> done{false};
  std::thread t([&] {
    failures = singleThreadDrivesAll(GetParam().nranks);
    done = true;
  });
  for (int i = 0; i < 3000 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (!done) {
    std::fprintf(stderr, "*** HANG: single thread driving %d InitAll comms did not finish in 300 s\n", GetParam().nranks);
    std::_Exit(3);
  }
  t.join();
  EXPECT_TRUE(failures.empty()) << failures;
}

INSTANTIATE_TEST_SUITE_P(InitAll, SingleThread, ::testing::ValuesIn(ranksParams(Launch::Threads)), ranksParamName);

}  // namespace
}  // namespace loomtest
