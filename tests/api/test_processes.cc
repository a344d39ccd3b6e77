// Ranks as forked processes (library default transport between processes: shm), 1..5 ranks: the
// same matrices as test_threads.cc (every collective, dtype x op, count, in/out of place, root);
// plus a check that ranks waiting on a late peer sleep instead of spinning.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "buffers.h"
#include "launch_config.h"
#include "matrix_test.h"

namespace loomtest {
namespace {

class Processes : public ::testing::TestWithParam<int> {
 protected:
  void run(std::vector<MatrixSpec> specs) { expectMatrixPasses(Launch::Processes, "", GetParam(), specs); }
  void run(MatrixSpec spec) { run(std::vector<MatrixSpec>{spec}); }
};

// Every dtype x every op at counts 0, 1, 3, 1000 and every dtype and op at 65537, in and out of
// place, root rotating.
TEST_P(Processes, AllReduce) { run(fullMatrix({Coll::AllReduce})); }
TEST_P(Processes, ReduceScatter) { run(fullMatrix({Coll::ReduceScatter})); }
TEST_P(Processes, Reduce) { run(fullMatrix({Coll::Reduce})); }
TEST_P(Processes, DataMovement) {
  run({.colls = {Coll::Broadcast, Coll::AllGather, Coll::AlltoAll, Coll::Gather, Coll::Scatter,
                 Coll::SendRecv}});
}
TEST_P(Processes, EveryRoot) {
  run({.colls = {Coll::Reduce, Coll::Broadcast, Coll::Gather, Coll::Scatter},
       .dtypes = {loomFloat32, loomInt8, loomFloat16},
       .ops = {Op::Sum, Op::Min, Op::PreMulSum},
       .crossDtypeOp = false,
       .everyRoot = true});
}

INSTANTIATE_TEST_SUITE_P(Ranks, Processes, ::testing::ValuesIn(rankCounts(maxRanks(Launch::Processes))), rankParamName);

double cpuSecondsOfProcess() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

// Rank 0 arrives 2 s late to an allreduce and to a send; the others wait inside Loom meanwhile.
// "Progress spins briefly, then sleeps": a waiting process may not burn a core for seconds.
std::string lateRankBody(RankContext& ctx) {
  constexpr double kLateSeconds = 2.0;
  constexpr double kMaxCpuWhileWaiting = 0.5;
  loomComm_t comm = ctx.comm;
  float x = 1, y = 0;
  LT_CALL(comm, loomAllReduce(&x, &y, 1, loomFloat32, loomSum, comm, nullptr));  // everyone is up
  std::string out;
  for (int phase = 0; phase < 2; ++phase) {
    ctx.note(phase == 0 ? "late allreduce" : "late send/recv");
    if (ctx.rank == 0) std::this_thread::sleep_for(std::chrono::duration<double>(kLateSeconds));
    double cpu0 = cpuSecondsOfProcess();
    auto t0 = std::chrono::steady_clock::now();
    if (phase == 0) {
      LT_CALL(comm, loomAllReduce(&x, &y, 1, loomFloat32, loomSum, comm, nullptr));
      if (y != static_cast<float>(ctx.nranks)) out += "late allreduce gave " + std::to_string(y) + "; ";
    } else if (ctx.rank == 0) {
      for (int p = 1; p < ctx.nranks; ++p) LT_CALL(comm, loomSend(&x, 1, loomFloat32, p, comm, nullptr));
    } else {
      y = 0;
      LT_CALL(comm, loomRecv(&y, 1, loomFloat32, 0, comm, nullptr));
      if (y != 1.0f) out += "late recv gave " + std::to_string(y) + "; ";
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double cpu = cpuSecondsOfProcess() - cpu0;
    if (ctx.rank != 0 && cpu > kMaxCpuWhileWaiting)
      out += std::string(phase == 0 ? "allreduce" : "recv") + ": waited " + std::to_string(wall) + " s for rank 0 using " +
             std::to_string(cpu) + " s of CPU (limit " + std::to_string(kMaxCpuWhileWaiting) + " s); ";
  }
  return out;
}

TEST(ProcessesProgress, WaitingRanksDoNotSpin) {
  for (const char* transport : {"", "socket"}) {
    RunOptions options;
    options.transport = transport;
    options.timeoutSec = 120;
    std::string failures = runRanks(Launch::Processes, 5, options, lateRankBody);
    EXPECT_TRUE(failures.empty()) << "LOOM_TRANSPORT=" << transport << ":\n" << failures;
  }
}

}  // namespace
}  // namespace loomtest
