// Gated operations (device/operation_gate.h): what device buffers staged on a CUDA stream rely on,
// checked with host gates so that it runs on every machine. A gated operation returns at once, runs
// on the communicator's progress thread (started for a blocking communicator too) only once its
// gate is ready, and always finishes its gate: with Ok, or with the error that broke the
// communicator, which every rank then reports.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/run/group.h"
#include "loom.h"
#include "thread_ranks.h"

namespace {

using std::chrono_literals::operator""ms;
using std::chrono_literals::operator""s;

class TestGate final : public loom::device::OperationGate {
 public:
  loom::Status ready(bool* isReady) override {
    *isReady = open.load();
    return failure;
  }
  std::atomic<bool> open{false};
  loom::Status failure;  // set before the operation is submitted
  std::future<loom::Status> outcome() { return promise_.get_future(); }

 private:
  void onFinish(const loom::Status& st) override { promise_.set_value(st); }
  std::promise<loom::Status> promise_;
};

// Runs body(rank, comm) on n threads with blocking communicators.
void runRanks(int n, int timeoutMs, const std::function<void(int, loomComm_t)>& body) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.commName = "gate-test";
  if (timeoutMs > 0) config.timeoutMs = timeoutMs;
  runThreadRanks(n, config, body);
}

loom::Operation allReduce(loomComm_t comm, const float* send, float* recv, size_t count,
                          std::shared_ptr<loom::device::OperationGate> gate) {
  loom::Operation op;
  op.coll = loom::Collective::AllReduce;
  op.comm = comm;
  op.send = send;
  op.recv = recv;
  op.count = count;
  op.dtype = loomFloat32;
  op.op = loomSum;
  op.gate = std::move(gate);
  return op;
}

TEST(Gates, OperationReturnsAtOnceAndStartsWhenItsGateIsReady) {
  runRanks(2, 0, [](int rank, loomComm_t comm) {
    const size_t count = 100003;
    std::vector<float> in(count, 1.0f + rank), out(count, -1.0f);
    auto gate = std::make_shared<TestGate>();
    auto outcome = gate->outcome();
    ASSERT_TRUE(loom::submitOperation(allReduce(comm, in.data(), out.data(), count, gate)).ok());
    EXPECT_TRUE(gate->claimed());
    // Not ready: nothing may have run, on either rank.
    EXPECT_EQ(outcome.wait_for(100ms), std::future_status::timeout);
    EXPECT_EQ(out[0], -1.0f);
    EXPECT_EQ(out[count - 1], -1.0f);
    gate->open = true;
    ASSERT_EQ(outcome.wait_for(20s), std::future_status::ready);
    loom::Status st = outcome.get();
    ASSERT_TRUE(st.ok()) << st.message();
    for (size_t i = 0; i < count; i += 101) ASSERT_EQ(out[i], 3.0f) << i;
    ASSERT_EQ(out[count - 1], 3.0f);
    // The blocking communicator now has a progress thread; a host call still returns complete.
    std::vector<float> again(count, 2.0f);
    ASSERT_EQ(loomAllReduce(again.data(), again.data(), count, loomFloat32, loomMax, comm, nullptr), loomSuccess)
        << loomGetLastError(comm);
    for (size_t i = 0; i < count; i += 101) ASSERT_EQ(again[i], 2.0f) << i;
  });
}

TEST(Gates, GatedOperationsRunInCallOrder) {
  runRanks(3, 0, [](int rank, loomComm_t comm) {
    const size_t count = 4099;
    std::vector<float> x(count, 1.0f + rank);
    auto first = std::make_shared<TestGate>();
    auto second = std::make_shared<TestGate>();
    auto firstDone = first->outcome(), secondDone = second->outcome();
    ASSERT_TRUE(loom::submitOperation(allReduce(comm, x.data(), x.data(), count, first)).ok());
    ASSERT_TRUE(loom::submitOperation(allReduce(comm, x.data(), x.data(), count, second)).ok());
    second->open = true;  // ready first, but queued behind `first`
    EXPECT_EQ(secondDone.wait_for(100ms), std::future_status::timeout);
    first->open = true;
    ASSERT_EQ(firstDone.wait_for(20s), std::future_status::ready);
    ASSERT_EQ(secondDone.wait_for(20s), std::future_status::ready);
    EXPECT_TRUE(firstDone.get().ok());
    EXPECT_TRUE(secondDone.get().ok());
    for (size_t i = 0; i < count; i += 97) ASSERT_EQ(x[i], 18.0f) << i;  // (1+2+3) * 3
  });
}

TEST(Gates, BrokenGateFailsEveryRankAndFinishesEveryGate) {
  runRanks(2, 0, [](int rank, loomComm_t comm) {
    const size_t count = 1 << 16;
    std::vector<float> in(count, 1.0f), out(count, 0.0f);
    auto gate = std::make_shared<TestGate>();
    if (rank == 0) gate->failure = loom::Status(loomUnhandledCudaError, "the stream's copy failed");
    gate->open = true;
    auto outcome = gate->outcome();
    ASSERT_TRUE(loom::submitOperation(allReduce(comm, in.data(), out.data(), count, gate)).ok());
    ASSERT_EQ(outcome.wait_for(60s), std::future_status::ready) << "rank " << rank << "'s gate was never finished";
    loom::Status st = outcome.get();
    EXPECT_FALSE(st.ok());
    if (rank == 0) {
      EXPECT_NE(st.message().find("the stream's copy failed"), std::string::npos) << st.message();
    } else {
      EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
    }
    loomResult_t async = loomSuccess;
    ASSERT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
    EXPECT_NE(async, loomSuccess);
    // Later calls are refused with the reason instead of hanging.
    EXPECT_NE(loomAllReduce(in.data(), out.data(), count, loomFloat32, loomSum, comm, nullptr), loomSuccess);
  });
}

TEST(Gates, GateThatNeverOpensTimesOut) {
  runRanks(1, 300, [](int, loomComm_t comm) {
    std::vector<float> x(10, 1.0f);
    auto gate = std::make_shared<TestGate>();
    auto outcome = gate->outcome();
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(loom::submitOperation(allReduce(comm, x.data(), x.data(), x.size(), gate)).ok());
    ASSERT_EQ(outcome.wait_for(30s), std::future_status::ready);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
    loom::Status st = outcome.get();
    EXPECT_EQ(st.code(), loomTimeout) << st.message();
    EXPECT_NE(st.message().find("not ready"), std::string::npos) << st.message();
    loomResult_t async = loomSuccess;
    ASSERT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
    EXPECT_EQ(async, loomTimeout);
  });
}

TEST(Gates, AbortFinishesAGateThatNeverOpened) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomComm_t comm = nullptr;
  ASSERT_EQ(loomCommInitRank(&comm, 1, id, 0), loomSuccess);
  std::vector<float> x(10, 1.0f);
  auto gate = std::make_shared<TestGate>();
  auto outcome = gate->outcome();
  ASSERT_TRUE(loom::submitOperation(allReduce(comm, x.data(), x.data(), x.size(), gate)).ok());
  ASSERT_EQ(loomCommAbort(comm), loomSuccess);
  ASSERT_EQ(outcome.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(outcome.get().ok());
}

}  // namespace
