// The full matrix on ranks that are threads of this process (library default transport: local),
// 1..8 ranks (the counts of launch_config.h): every dtype x every op at counts 0, 1, 3, 1000 (and every dtype and every op at
// 65537), in place and out of place; data movement for every dtype at every count; every root.
#include <sys/resource.h>

#include <chrono>
#include <thread>

#include "launch_config.h"
#include "matrix_test.h"

namespace loomtest {
namespace {

class Threads : public ::testing::TestWithParam<int> {
 protected:
  void run(std::vector<MatrixSpec> specs) { expectMatrixPasses(Launch::Threads, "", GetParam(), specs); }
  void run(MatrixSpec spec) { run(std::vector<MatrixSpec>{spec}); }
};

TEST_P(Threads, AllReduce) { run(fullMatrix({Coll::AllReduce})); }
TEST_P(Threads, ReduceScatter) { run(fullMatrix({Coll::ReduceScatter})); }
TEST_P(Threads, Reduce) { run(fullMatrix({Coll::Reduce})); }
TEST_P(Threads, Broadcast) { run({.colls = {Coll::Broadcast}}); }
TEST_P(Threads, AllGather) { run({.colls = {Coll::AllGather}}); }
TEST_P(Threads, AlltoAll) { run({.colls = {Coll::AlltoAll}}); }
TEST_P(Threads, Gather) { run({.colls = {Coll::Gather}}); }
TEST_P(Threads, Scatter) { run({.colls = {Coll::Scatter}}); }
TEST_P(Threads, SendRecvRing) { run({.colls = {Coll::SendRecv}}); }

// Every root, at every count, in and out of place (the matrices above rotate the root).
TEST_P(Threads, EveryRoot) {
  run({.colls = {Coll::Reduce, Coll::Broadcast, Coll::Gather, Coll::Scatter},
       .dtypes = {loomFloat32, loomInt8, loomBfloat16},
       .ops = {Op::Sum, Op::Max, Op::Avg},
       .crossDtypeOp = false,
       .everyRoot = true});
}

INSTANTIATE_TEST_SUITE_P(Ranks, Threads, ::testing::ValuesIn(rankCounts(maxRanks(Launch::Threads))), rankParamName);

}  // namespace
}  // namespace loomtest

namespace loomtest {
namespace {

double processCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

// Rank 0 arrives 2 s late to an allreduce; meanwhile the other ranks wait inside Loom. The whole
// process (waiting ranks and any progress threads) may use at most 1 s of CPU in those 2 s.
TEST(ThreadsProgress, WaitingRanksDoNotSpin) {
  for (const char* transport : {"", "shm", "socket"}) {
    RunOptions options;
    options.transport = transport;
    options.timeoutSec = 120;
    std::string failures = runRanks(Launch::Threads, 5, options, [](RankContext& ctx) -> std::string {
      float x = 1, y = 0;
      LT_CALL(ctx.comm, loomAllReduce(&x, &y, 1, loomFloat32, loomSum, ctx.comm, nullptr));
      std::string out;
      if (ctx.rank == 0) {
        double cpu0 = processCpuSeconds();
        std::this_thread::sleep_for(std::chrono::seconds(2));
        double cpu = processCpuSeconds() - cpu0;
        if (cpu > 1.0)
          out = "while rank 0 slept 2 s, the 4 waiting ranks used " + std::to_string(cpu) + " s of CPU (limit 1 s)";
      }
      ctx.note("late allreduce");
      LT_CALL(ctx.comm, loomAllReduce(&x, &y, 1, loomFloat32, loomSum, ctx.comm, nullptr));
      if (y != 5.0f) out += " late allreduce gave " + std::to_string(y);
      return out;
    });
    EXPECT_TRUE(failures.empty()) << "LOOM_TRANSPORT=" << transport << ":\n" << failures;
  }
}

}  // namespace
}  // namespace loomtest
