// Communicator lifecycle and queries: version, error strings, unique ids, count/rank/device,
// InitRankConfig, Finalize + Destroy, InitAll, bad init arguments, PreMulSum op management.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "cases.h"
#include "launch_config.h"

namespace loomtest {
namespace {

// Process-free checks: run once, with thread ranks (tests/api/meson.build leaves them out of the
// process runs).
TEST(Api, Version) {
  int v = -1;
  ASSERT_EQ(loomGetVersion(&v), loomSuccess);
  EXPECT_EQ(v, LOOM_VERSION_CODE);
  EXPECT_EQ(loomGetVersion(nullptr), loomInvalidArgument);
}

TEST(Api, MemoryKinds) {
  int kinds = 0;
  ASSERT_EQ(loomGetMemoryKinds(&kinds), loomSuccess);
  EXPECT_TRUE(kinds & LOOM_MEMORY_HOST);
  EXPECT_EQ(kinds & ~(LOOM_MEMORY_HOST | LOOM_MEMORY_CUDA), 0);
  // Whether CUDA is in it: tests/gpu/test_host_only.cc, which can ask CUDA itself.
  EXPECT_EQ(loomGetMemoryKinds(nullptr), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("kinds is NULL"), std::string::npos);
}

TEST(Api, ErrorStringForEveryResult) {
  std::set<std::string> seen;
  for (int r = loomSuccess; r < loomNumResults; ++r) {
    const char* s = loomGetErrorString(static_cast<loomResult_t>(r));
    ASSERT_NE(s, nullptr) << "result " << r;
    EXPECT_STRNE(s, "") << "result " << r;
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(loomNumResults)) << "two results share an error string";
  for (int bogus : {static_cast<int>(loomNumResults), 99, -1}) {
    const char* s = loomGetErrorString(static_cast<loomResult_t>(bogus));
    ASSERT_NE(s, nullptr) << "result " << bogus;
    EXPECT_STRNE(s, "") << "result " << bogus;
  }
  EXPECT_NE(loomGetLastError(nullptr), nullptr);
}

// Inside a group an init is deferred to the group's end, but bad arguments are refused at the call,
// as outside one: a NULL comm, a config not made with LOOM_CONFIG_INITIALIZER, a negative timeout. The
// group then ends with nothing to do.
TEST(Api, GroupedInitRefusesBadArgumentsAtTheCall) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  EXPECT_EQ(loomCommInitRank(nullptr, 2, id, 0), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("comm is NULL"), std::string::npos) << loomGetLastError(nullptr);
  loomComm_t comm = reinterpret_cast<loomComm_t>(&id);  // not a communicator: the call must not keep it
  loomConfig_t junk;
  std::memset(&junk, 0x5a, sizeof junk);
  EXPECT_EQ(loomCommInitRankConfig(&comm, 2, id, 0, &junk), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("LOOM_CONFIG_INITIALIZER"), std::string::npos)
      << loomGetLastError(nullptr);
  loomConfig_t negative = LOOM_CONFIG_INITIALIZER;
  negative.timeoutMs = -5;
  EXPECT_EQ(loomCommInitRankConfig(&comm, 2, id, 0, &negative), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("negative"), std::string::npos) << loomGetLastError(nullptr);
  EXPECT_EQ(loomGroupEnd(), loomSuccess);
}

TEST(Api, UniqueIdsDiffer) {
  loomUniqueId a, b;
  ASSERT_EQ(loomGetUniqueId(&a), loomSuccess);
  ASSERT_EQ(loomGetUniqueId(&b), loomSuccess);
  EXPECT_NE(std::memcmp(&a, &b, sizeof a), 0);
  EXPECT_EQ(loomGetUniqueId(nullptr), loomInvalidArgument);
  EXPECT_STRNE(loomGetLastError(nullptr), "");
}

// Init arguments that are wrong on their face fail at once, without waiting for peers.
TEST(Api, BadInitArguments) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomComm_t comm = nullptr;
  EXPECT_EQ(loomCommInitRank(&comm, 0, id, 0), loomInvalidArgument);
  EXPECT_EQ(loomCommInitRank(&comm, -3, id, 0), loomInvalidArgument);
  EXPECT_EQ(loomCommInitRank(&comm, 2, id, 2), loomInvalidArgument);
  EXPECT_EQ(loomCommInitRank(&comm, 2, id, -1), loomInvalidArgument);
  EXPECT_EQ(loomCommInitRank(nullptr, 1, id, 0), loomInvalidArgument);
  EXPECT_STRNE(loomGetLastError(nullptr), "");
  EXPECT_EQ(loomCommInitAll(nullptr, 2, nullptr), loomInvalidArgument);
  loomComm_t comms[2];
  EXPECT_EQ(loomCommInitAll(comms, 0, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomCommInitAll(comms, -1, nullptr), loomInvalidArgument);
  EXPECT_EQ(comm, nullptr);
}

// An InitAll whose ranks fail (here all of them, on a bad setting) reports the first failure and
// leaves every slot null; the ranks that failed left no communicator to destroy.
TEST(Api, InitAllThatFailsLeavesNullCommunicators) {
  setenv("LOOM_ALGO", "no-such-algorithm", 1);
  loomComm_t comms[3] = {reinterpret_cast<loomComm_t>(0x1), reinterpret_cast<loomComm_t>(0x1),
                         reinterpret_cast<loomComm_t>(0x1)};
  const loomResult_t r = loomCommInitAll(comms, 3, nullptr);
  unsetenv("LOOM_ALGO");
  EXPECT_EQ(r, loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("LOOM_ALGO"), std::string::npos) << loomGetLastError(nullptr);
  for (loomComm_t c : comms) EXPECT_EQ(c, nullptr);
}

// Every entry point answers a NULL argument with loomInvalidArgument and a message naming itself.
TEST(Api, NullArgumentsOfEveryEntryPoint) {
  auto named = [](const char* call) {
    return std::string(loomGetLastError(nullptr)).find(call) != std::string::npos;
  };
  EXPECT_EQ(loomGetVersion(nullptr), loomInvalidArgument);
  EXPECT_TRUE(named("loomGetVersion"));
  EXPECT_EQ(loomGetMemoryKinds(nullptr), loomInvalidArgument);
  EXPECT_TRUE(named("loomGetMemoryKinds"));
  loomResult_t async;
  EXPECT_EQ(loomCommGetAsyncError(nullptr, &async), loomInvalidArgument);
  EXPECT_TRUE(named("loomCommGetAsyncError"));
  EXPECT_EQ(loomCommWaitOp(nullptr, 1, 0), loomInvalidArgument);
  EXPECT_TRUE(named("loomCommWaitOp"));
  uint64_t op;
  EXPECT_EQ(loomCommLastOpId(nullptr, &op), loomInvalidArgument);
  EXPECT_TRUE(named("loomCommLastOpId"));
  int n;
  EXPECT_EQ(loomCommCount(nullptr, &n), loomInvalidArgument);
  EXPECT_EQ(loomCommUserRank(nullptr, &n), loomInvalidArgument);
  EXPECT_EQ(loomCommCuDevice(nullptr, &n), loomInvalidArgument);
  EXPECT_TRUE(named("loomCommCuDevice"));
  EXPECT_EQ(loomCommDestroy(nullptr), loomInvalidArgument);
  EXPECT_TRUE(named("loomCommDestroy"));
  EXPECT_EQ(loomCommAbort(nullptr), loomInvalidArgument);
  EXPECT_TRUE(named("loomCommAbort"));
}
class Comm : public ::testing::TestWithParam<RanksParam> {
 protected:
  void run(const RankBody& body, bool raw = false) {
    RunOptions options;
    options.transport = GetParam().transport;
    options.timeoutSec = 120;
    std::string failures = raw ? runRanksRaw(testLaunch(), GetParam().nranks, options, body)
                               : runRanks(testLaunch(), GetParam().nranks, options, body);
    EXPECT_TRUE(failures.empty()) << failures;
  }
};

TEST_P(Comm, CountRankDevice) {
  run([](RankContext& ctx) -> std::string {
    int count = -5, rank = -5, dev = -5;
    LT_CALL(ctx.comm, loomCommCount(ctx.comm, &count));
    LT_CALL(ctx.comm, loomCommUserRank(ctx.comm, &rank));
    LT_CALL(ctx.comm, loomCommCuDevice(ctx.comm, &dev));
    if (count != ctx.nranks || rank != ctx.rank || dev != -1)
      return "count/rank/device = " + std::to_string(count) + "/" + std::to_string(rank) + "/" + std::to_string(dev) +
             ", expected " + std::to_string(ctx.nranks) + "/" + std::to_string(ctx.rank) + "/-1";
    std::string out;
    if (loomCommCount(ctx.comm, nullptr) != loomInvalidArgument) out += "loomCommCount(comm, NULL) accepted; ";
    if (loomCommUserRank(ctx.comm, nullptr) != loomInvalidArgument) out += "loomCommUserRank(comm, NULL) accepted; ";
    if (loomCommCuDevice(ctx.comm, nullptr) != loomInvalidArgument) out += "loomCommCuDevice(comm, NULL) accepted; ";
    if (loomCommCount(nullptr, &count) != loomInvalidArgument) out += "loomCommCount(NULL, &n) accepted; ";
    if (loomCommUserRank(nullptr, &rank) != loomInvalidArgument) out += "loomCommUserRank(NULL, &r) accepted; ";
    loomResult_t async = loomInternalError;
    LT_CALL(ctx.comm, loomCommGetAsyncError(ctx.comm, &async));
    if (async != loomSuccess) out += "loomCommGetAsyncError on a healthy comm gave " + std::to_string(async) + "; ";
    return out;
  });
}

// loomCommInitRankConfig with a name and blocking=1; then loomCommFinalize before loomCommDestroy.
TEST_P(Comm, InitRankConfigAndFinalize) {
  run(
      [](RankContext& ctx) -> std::string {
        loomConfig_t config = LOOM_CONFIG_INITIALIZER;
        config.blocking = 1;
        config.commName = "api-test-comm";
        loomComm_t comm = nullptr;
        LT_CALL(nullptr, loomCommInitRankConfig(&comm, ctx.nranks, ctx.id, ctx.rank, &config));
        if (!comm) return "loomCommInitRankConfig gave a null communicator";
        ctx.comm = comm;
        Case c;
        c.coll = Coll::AllReduce;
        c.dtype = loomFloat16;
        c.op = Op::Sum;
        c.count = 1000;
        std::string out = runCases(ctx, {c});
        if (!ctx.comm) return out;  // aborted after a failed call
        LT_CALL(comm, loomCommFinalize(comm));
        LT_CALL(comm, loomCommDestroy(comm));
        return out;
      },
      /*raw=*/true);
}

// PreMulSum ops: several alive at once on one comm, in different dtypes; bad creations and
// destroying a built-in op are rejected.
TEST_P(Comm, PreMulSumOps) {
  run([](RankContext& ctx) -> std::string {
    loomComm_t comm = ctx.comm;
    std::string out;
    loomRedOp_t ops[3];
    double d = 2.0;
    float f = -0.5f;
    int32_t i = 5;
    LT_CALL(comm, loomRedOpCreatePreMulSum(&ops[0], &d, loomFloat64, loomScalarHostImmediate, comm));
    LT_CALL(comm, loomRedOpCreatePreMulSum(&ops[1], &f, loomFloat32, loomScalarHostImmediate, comm));
    LT_CALL(comm, loomRedOpCreatePreMulSum(&ops[2], &i, loomInt32, loomScalarHostImmediate, comm));
    if (ops[0] < loomNumOps || ops[1] < loomNumOps || ops[2] < loomNumOps || ops[0] == ops[1] || ops[1] == ops[2])
      out += "PreMulSum op handles are not distinct values >= loomNumOps; ";
    double dv = ctx.rank + 1, dr = 0;
    float fv = static_cast<float>(ctx.rank + 1), fr = 0;
    int32_t iv = ctx.rank + 1, ir = 0;
    const int n = ctx.nranks, tri = n * (n + 1) / 2;
    LT_CALL(comm, loomAllReduce(&fv, &fr, 1, loomFloat32, ops[1], comm, nullptr));
    LT_CALL(comm, loomAllReduce(&dv, &dr, 1, loomFloat64, ops[0], comm, nullptr));
    LT_CALL(comm, loomAllReduce(&iv, &ir, 1, loomInt32, ops[2], comm, nullptr));
    if (dr != 2.0 * tri) out += "float64 premulsum x2 gave " + std::to_string(dr) + "; ";
    if (fr != -0.5f * tri) out += "float32 premulsum x-0.5 gave " + std::to_string(fr) + "; ";
    if (ir != 5 * tri) out += "int32 premulsum x5 gave " + std::to_string(ir) + "; ";
    for (auto op : ops) LT_CALL(comm, loomRedOpDestroy(op, comm));
    loomRedOp_t bad;
    if (loomRedOpCreatePreMulSum(&bad, nullptr, loomFloat32, loomScalarHostImmediate, comm) != loomInvalidArgument)
      out += "PreMulSum with a NULL scalar accepted; ";
    if (loomRedOpCreatePreMulSum(&bad, &f, static_cast<loomDataType_t>(99), loomScalarHostImmediate, comm) != loomInvalidArgument)
      out += "PreMulSum with dtype 99 accepted; ";
    if (loomRedOpCreatePreMulSum(nullptr, &f, loomFloat32, loomScalarHostImmediate, comm) != loomInvalidArgument)
      out += "PreMulSum with a NULL op pointer accepted; ";
    if (loomRedOpDestroy(loomSum, comm) != loomInvalidArgument) out += "loomRedOpDestroy(loomSum) accepted; ";
    // Many create/destroy cycles do not run out of op slots.
    for (int k = 0; k < 300; ++k) {
      loomRedOp_t op;
      LT_CALL(comm, loomRedOpCreatePreMulSum(&op, &f, loomFloat32, loomScalarHostImmediate, comm));
      LT_CALL(comm, loomRedOpDestroy(op, comm));
    }
    return out;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Comm, ::testing::ValuesIn(ranksParams()), ranksParamName);

}  // namespace
}  // namespace loomtest
