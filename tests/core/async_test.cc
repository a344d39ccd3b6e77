// Nonblocking communicators: operations queue to the progress thread and complete out of the
// caller's way; a send never waits for a later receive.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "loom.h"
#include "thread_ranks.h"

namespace {

// Runs body(rank, comm) on n threads, each with a nonblocking communicator.
void runNonblocking(int n, const std::function<void(int, loomComm_t)>& body) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "async-test";
  runThreadRanks(n, config, body);
}

TEST(Async, SendsDoNotWaitForLaterReceives) {
  const size_t count = 8u << 20;  // far beyond what the FIFOs hold
  runNonblocking(2, [&](int rank, loomComm_t comm) {
    int peer = 1 - rank;
    std::vector<int32_t> out(count), in(count, -1);
    for (size_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(i * 3 + rank);
    ASSERT_EQ(loomSend(out.data(), count, loomInt32, peer, comm, nullptr), loomSuccess);
    uint64_t sendId = 0;
    ASSERT_EQ(loomCommLastOpId(comm, &sendId), loomSuccess);
    ASSERT_EQ(loomRecv(in.data(), count, loomInt32, peer, comm, nullptr), loomSuccess);
    uint64_t recvId = 0;
    ASSERT_EQ(loomCommLastOpId(comm, &recvId), loomSuccess);
    EXPECT_EQ(recvId, sendId + 1);
    ASSERT_EQ(loomCommWaitOp(comm, recvId, -1), loomSuccess) << loomGetLastError(comm);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], static_cast<int32_t>(i * 3 + peer)) << i;
  });
}

TEST(Async, CollectivesRunInOrderAndWaitReportsProgress) {
  runNonblocking(3, [&](int rank, loomComm_t comm) {
    const size_t count = 1 << 20;
    std::vector<float> a(count, 1.0f + rank), b(count, 0.0f);
    ASSERT_EQ(loomAllReduce(a.data(), a.data(), count, loomFloat32, loomSum, comm, nullptr), loomSuccess);
    ASSERT_EQ(loomAllReduce(a.data(), b.data(), count, loomFloat32, loomMax, comm, nullptr), loomSuccess);
    uint64_t last = 0;
    ASSERT_EQ(loomCommLastOpId(comm, &last), loomSuccess);
    loomResult_t state = loomCommWaitOp(comm, last, 0);
    EXPECT_TRUE(state == loomSuccess || state == loomInProgress);
    ASSERT_EQ(loomCommWaitOp(comm, last, -1), loomSuccess) << loomGetLastError(comm);
    for (size_t i = 0; i < count; i += 4099) {
      ASSERT_EQ(a[i], 6.0f);
      ASSERT_EQ(b[i], 6.0f);
    }
    EXPECT_EQ(loomCommWaitOp(comm, last + 1, 0), loomInvalidArgument);
  });
}

TEST(Async, GroupedExchangeAndFinalizeFlushes) {
  runNonblocking(4, [&](int rank, loomComm_t comm) {
    const int n = 4;
    std::vector<std::vector<int64_t>> out(n), in(n);
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    for (int p = 0; p < n; ++p) {
      size_t count = 1000 + 37 * static_cast<size_t>(rank + p);  // pair-specific size
      out[p].assign(count, rank * 100 + p);
      in[p].assign(count, -1);
      ASSERT_EQ(loomSend(out[p].data(), count, loomInt64, p, comm, nullptr), loomSuccess);
      ASSERT_EQ(loomRecv(in[p].data(), count, loomInt64, p, comm, nullptr), loomSuccess);
    }
    ASSERT_EQ(loomGroupEnd(), loomSuccess);
    ASSERT_EQ(loomCommFinalize(comm), loomSuccess) << loomGetLastError(comm);
    for (int p = 0; p < n; ++p)
      for (int64_t v : in[p]) ASSERT_EQ(v, p * 100 + rank);
  });
}

TEST(Async, StagedInputsAreReadWhenTheOperationRuns) {
  // PreMulSum scales a copy of its input; on a queue that copy must see what the earlier queued
  // allreduce wrote into the same buffer, not the buffer as it was at issue time.
  runNonblocking(2, [&](int, loomComm_t comm) {
    const size_t count = 4u << 20;
    std::vector<float> x(count, 1.0f);
    ASSERT_EQ(loomAllReduce(x.data(), x.data(), count, loomFloat32, loomSum, comm, nullptr), loomSuccess);
    float scalar = 2.0f;
    loomRedOp_t premul;
    ASSERT_EQ(loomRedOpCreatePreMulSum(&premul, &scalar, loomFloat32, loomScalarHostImmediate, comm), loomSuccess);
    ASSERT_EQ(loomAllReduce(x.data(), x.data(), count, loomFloat32, premul, comm, nullptr), loomSuccess);
    uint64_t last = 0;
    ASSERT_EQ(loomCommLastOpId(comm, &last), loomSuccess);
    ASSERT_EQ(loomCommWaitOp(comm, last, -1), loomSuccess) << loomGetLastError(comm);
    for (size_t i = 0; i < count; i += 997) ASSERT_EQ(x[i], 8.0f) << i;  // (1+1) -> 2*2 + 2*2
    EXPECT_EQ(loomRedOpDestroy(premul, comm), loomSuccess);
  });
}

}  // namespace
