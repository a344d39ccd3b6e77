// Device collectives in the flight record (the GPU latency issue, point 5): plan kernels' operations
// are numbered like host ones, so that a rank that skips one is named by the hang report, and the
// lanes of a launch in flight say whom they wait on. Three rank threads share GPU 0 as plan kernels;
// after two good all-reduces and a meeting on the host, ranks 0 and 1 enter a third all-reduce and
// rank 2 does not. While the kernels of ranks 0 and 1 wait, every rank's state is dumped
// (loomCommDumpState) and lined up (loomHangReport): rank 2 never entered the operation the others
// wait in, and they wait on rank 2. Rank 2 then joins, everything completes and the states say so.
// A second case lets the lanes time out instead: the failure names the operation's number and rank 2,
// and the state says this rank's own wait timed out. On FakeCuda and on a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../api/harness.h"
#include "device_cases.h"
#include "gpu_support.h"

namespace loomgpu {
namespace {

constexpr int kRanks = 3;
constexpr int kSkipper = 2;
constexpr size_t kCount = 1000;

std::string dumpState(loomComm_t comm) {
  size_t bytes = 1 << 16;
  std::string out(bytes, '\0');
  if (loomCommDumpState(comm, out.data(), &bytes) != loomSuccess) return "";
  out.resize(bytes - 1);
  return out;
}

nlohmann::json stateOf(loomComm_t comm) {
  const std::string s = dumpState(comm);
  return s.empty() ? nlohmann::json::object() : nlohmann::json::parse(s, nullptr, false);
}

// The report of these states, as text and as JSON.
std::string reportOf(const std::vector<std::string>& states, int format) {
  std::vector<const char*> ptrs;
  for (const std::string& s : states) ptrs.push_back(s.c_str());
  size_t bytes = 1 << 16;
  std::string out(bytes, '\0');
  if (loomHangReport(ptrs.data(), static_cast<int>(ptrs.size()), format, out.data(), &bytes) != loomSuccess) return "";
  out.resize(bytes - 1);
  return out;
}

// One all-reduce of kCount floats on the device: every rank gives rank + 1 + round.
std::string allReduce(loomtest::RankContext& ctx, cudaStream_t stream, DeviceBuffer& send, DeviceBuffer& recv, int round) {
  std::vector<float> input(kCount, static_cast<float>(ctx.rank + 1 + round));
  send.upload(input.data(), kCount * sizeof(float));
  if (loomAllReduce(send.data(), recv.data(), kCount, loomFloat32, loomSum, ctx.comm, stream) != loomSuccess)
    return " all-reduce " + std::to_string(round) + ": " + std::string(loomGetLastError(ctx.comm)) + ";";
  return "";
}

std::string checkSum(loomtest::RankContext& ctx, cudaStream_t stream, DeviceBuffer& recv, int round) {
  cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const std::vector<uint8_t> out = recv.download();
  const float* got = reinterpret_cast<const float*>(out.data());
  const float want = static_cast<float>(ctx.nranks * (ctx.nranks + 1) / 2 + ctx.nranks * round);
  for (size_t i = 0; i < kCount; ++i)
    if (got[i] != want) return " round " + std::to_string(round) + " element " + std::to_string(i) + " is " + std::to_string(got[i]) + ";";
  return "";
}

// What the ranks share: their communicators (rank 2 dumps every rank's state) and how far they got.
struct Job {
  loomComm_t comms[kRanks] = {};
  std::atomic<int> entered{0};  // ranks that issued the operation rank 2 skips
  std::atomic<bool> timedOut{false};
};

// Rank 2, while ranks 0 and 1 wait in their third device operation: their lanes say whom they wait on
// once a wait lasted (DeviceLaneStatus::waitingOn); the report lines the three states up.
std::string checkTheWedgedJob(Job& job) {
  std::string problems;
  for (int attempt = 0; attempt < 200; ++attempt) {  // the waits' notes come after some hundred rounds
    const nlohmann::json s0 = stateOf(job.comms[0]), s1 = stateOf(job.comms[1]);
    if (s0.value("waiting_on", -1) == kSkipper || s1.value("waiting_on", -1) == kSkipper) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<std::string> states;
  for (loomComm_t c : job.comms) states.push_back(dumpState(c));
  const nlohmann::json mine = nlohmann::json::parse(states[kSkipper], nullptr, false);
  const uint64_t skipped = mine.value("last_issued", uint64_t{0}) + 1;
  for (int r = 0; r < kRanks; ++r) {
    const nlohmann::json s = nlohmann::json::parse(states[static_cast<size_t>(r)], nullptr, false);
    const uint64_t issued = s.value("last_issued", uint64_t{0}), done = s.value("completed_up_to", uint64_t{0});
    const uint64_t wantIssued = r == kSkipper ? skipped - 1 : skipped;
    if (issued != wantIssued || done != skipped - 1)
      problems += " rank " + std::to_string(r) + " issued #" + std::to_string(issued) + ", completed up to #" +
                  std::to_string(done) + " (want #" + std::to_string(wantIssued) + ", #" + std::to_string(skipped - 1) + ");";
  }
  const std::string text = reportOf(states, LOOM_REPORT_TEXT);
  const std::string want = "oldest operation not finished everywhere: #" + std::to_string(skipped) + " AllReduce of 1000 x float";
  if (text.find(want) == std::string::npos) problems += " the report lacks '" + want + "': " + text + ";";
  if (text.find("NEVER ENTERED: rank 2") == std::string::npos) problems += " the report does not name rank 2: " + text + ";";
  if (text.find("(on rank 2)") == std::string::npos) problems += " nobody waits on rank 2: " + text + ";";
  const nlohmann::json j = nlohmann::json::parse(reportOf(states, LOOM_REPORT_JSON), nullptr, false);
  const nlohmann::json& o = j["oldest_unfinished"];
  if (o["seq"] != skipped || o["never_entered"] != nlohmann::json::array({kSkipper}) ||
      o["waiting"] != nlohmann::json::array({0, 1}))
    problems += " the JSON report: " + j.dump() + ";";
  return problems;
}

std::string skipThenJoin(loomtest::RankContext& ctx, cudaStream_t stream, Job& job) {
  DeviceBuffer send(kCount * sizeof(float), 3), recv(kCount * sizeof(float), 5);
  job.comms[ctx.rank] = ctx.comm;
  std::string problems = meetOnTheHost(ctx);
  for (int round = 0; round < 2 && problems.empty(); ++round) {
    problems += allReduce(ctx, stream, send, recv, round);
    problems += checkSum(ctx, stream, recv, round);
  }
  problems += meetOnTheHost(ctx);
  if (!problems.empty()) return problems;
  if (ctx.rank != kSkipper) {
    problems += allReduce(ctx, stream, send, recv, 2);
    job.entered.fetch_add(1);
  } else {
    while (job.entered.load() < kRanks - 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    problems += checkTheWedgedJob(job);
    problems += allReduce(ctx, stream, send, recv, 2);  // late, but the others still wait
  }
  problems += checkSum(ctx, stream, recv, 2);
  problems += meetOnTheHost(ctx);
  if (ctx.rank == kSkipper) {
    // Every rank's launch of the operation ended (the others may be in the next meeting already).
    const uint64_t joined = stateOf(ctx.comm).value("last_issued", uint64_t{0}) - 1;
    for (int r = 0; r < kRanks; ++r) {
      const nlohmann::json s = stateOf(job.comms[r]);
      if (s.value("completed_up_to", uint64_t{0}) < joined)
        problems += " after the join (#" + std::to_string(joined) + "), rank " + std::to_string(r) + "'s state: " + s.dump() + ";";
    }
  }
  problems += meetOnTheHost(ctx);  // no rank's communicator goes while rank 2 reads its state
  return problems + send.checkGuards("send") + recv.checkGuards("recv");
}

// Runs `body` on `nranks` rank threads sharing one Job, with LOOM_TIMEOUT_MS set to `timeoutMs`.
using JobBody = std::string (*)(loomtest::RankContext&, cudaStream_t, Job&);
std::string runJob(int nranks, const char* timeoutMs, JobBody body) {
  const char* was = std::getenv("LOOM_TIMEOUT_MS");
  const std::string before = was ? was : "";
  setenv("LOOM_TIMEOUT_MS", timeoutMs, 1);
  Job job;
  loomtest::RunOptions run;
  run.timeoutSec = 120;
  const std::string failures = loomtest::runRanks(loomtest::Launch::Threads, nranks, run, [&](loomtest::RankContext& ctx) {
    return withStreamOnGpu0(ctx, [&](loomtest::RankContext& c, cudaStream_t s) { return body(c, s, job); });
  });
  if (was) setenv("LOOM_TIMEOUT_MS", before.c_str(), 1);
  else unsetenv("LOOM_TIMEOUT_MS");
  return failures;
}

TEST(DeviceFlightRecord, ARankThatSkipsADeviceCollectiveIsNamedAndTheOthersWaitOnIt) {
  LOOM_REQUIRE_GPU();
  EXPECT_EQ(runJob(kRanks, "60000", skipThenJoin), "");
}

// Rank 1 of 2 never enters the second device all-reduce: rank 0's lanes time out, and the failure,
// seen at rank 0's next look, names the operation's number and the rank it waited on; its state says
// its own wait timed out. Rank 1 leaves only after that, without calling anything on the device.
std::string timeOut(loomtest::RankContext& ctx, cudaStream_t stream, Job& job) {
  DeviceBuffer send(kCount * sizeof(float), 3), recv(kCount * sizeof(float), 5);
  std::string problems = meetOnTheHost(ctx);
  problems += allReduce(ctx, stream, send, recv, 0);
  problems += checkSum(ctx, stream, recv, 0);
  problems += meetOnTheHost(ctx);
  if (!problems.empty()) return problems;
  if (ctx.rank == 1) {
    while (!job.timedOut.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return "";
  }
  const uint64_t seq = stateOf(ctx.comm).value("last_issued", uint64_t{0}) + 1;
  problems += allReduce(ctx, stream, send, recv, 1);
  cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // the lanes gave up
  loomResult_t async = loomSuccess;
  const loomResult_t asked = loomCommGetAsyncError(ctx.comm, &async);
  const std::string why = loomGetLastError(ctx.comm);
  if (asked != loomSuccess || async != loomTimeout) problems += " the async error is " + std::to_string(async) + ";";
  const nlohmann::json s = stateOf(ctx.comm);
  const std::string failure = s.value("failure", std::string());
  if (failure.find("#" + std::to_string(seq)) == std::string::npos || failure.find("waiting on rank 1") == std::string::npos)
    problems += " the failure does not name #" + std::to_string(seq) + " and rank 1: " + failure + " (" + why + ");";
  if (!s.value("timed_out", false)) problems += " the state does not say its own wait timed out: " + s.dump() + ";";
  if (s.value("last_issued", uint64_t{0}) != seq) problems += " the state: " + s.dump() + ";";
  job.timedOut.store(true);
  return problems;
}

TEST(DeviceFlightRecord, ALaneThatTimesOutNamesTheOperationAndThePeer) {
  LOOM_REQUIRE_GPU();
  EXPECT_EQ(runJob(2, "1500", timeOut), "");
}

}  // namespace
}  // namespace loomgpu
