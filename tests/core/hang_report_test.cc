// Who is stuck (loom.h: loomCommDumpState, loomHangReport): live thread ranks wedged by planted faults
// (a rank that skips a collective, one stuck in compute, one that calls another collective or size,
// one that died), their states dumped while they wait and lined up into one report, which must name
// the right rank and operation in its text and its JSON; and states a rank could not give.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom.h"

namespace {

std::string dumpState(loomComm_t comm) {
  size_t bytes = 0;
  EXPECT_EQ(loomCommDumpState(comm, nullptr, &bytes), loomInvalidArgument);  // asks for the size
  std::string out(bytes, '\0');
  EXPECT_EQ(loomCommDumpState(comm, out.data(), &bytes), loomSuccess) << loomGetLastError(comm);
  out.resize(bytes - 1);
  return out;
}

struct Report {
  std::string text;
  nlohmann::json json;
};

Report report(const std::vector<std::string>& states) {
  std::vector<const char*> ptrs;
  for (const std::string& s : states) ptrs.push_back(s.empty() ? nullptr : s.c_str());
  Report r;
  for (int format : {LOOM_REPORT_TEXT, LOOM_REPORT_JSON}) {
    size_t bytes = 1 << 16;
    std::string out(bytes, '\0');
    EXPECT_EQ(loomHangReport(ptrs.data(), static_cast<int>(ptrs.size()), format, out.data(), &bytes), loomSuccess)
        << loomGetLastError(nullptr);
    out.resize(bytes - 1);
    if (format == LOOM_REPORT_TEXT) r.text = out;
    else r.json = nlohmann::json::parse(out);
  }
  return r;
}

// n thread ranks run body(rank, comm, release) after `warmup` good allreduces each; once the ranks have
// been in their bodies for 300 ms, every rank's state is dumped (from this thread: the ranks are
// wedged) and `release` is set; returns the report of those states. body returns true when it
// aborted comm (which frees it), else comm is destroyed here; a body that aborts before the dump sets
// `gone` first (its state is then what a dead process gives: none).
using Body = std::function<bool(int, loomComm_t, const std::atomic<bool>&, std::atomic<bool>&)>;
Report planted(int n, int warmup, const Body& body) {
  loomUniqueId id;
  EXPECT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomComm_t> comms(static_cast<size_t>(n), nullptr);
  std::atomic<int> ready{0};
  std::atomic<bool> release{false};
  std::vector<char> aborted(static_cast<size_t>(n), 0);
  std::vector<std::atomic<bool>> gone(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      loomConfig_t config = LOOM_CONFIG_INITIALIZER;
      config.timeoutMs = 20000;
      loomComm_t comm = nullptr;
      ASSERT_EQ(loomCommInitRankConfig(&comm, n, id, r, &config), loomSuccess);
      std::vector<float> data(1000, 1.0f);
      for (int i = 0; i < warmup; ++i)
        EXPECT_EQ(loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum, comm, nullptr), loomSuccess);
      comms[static_cast<size_t>(r)] = comm;
      ++ready;
      aborted[static_cast<size_t>(r)] = body(r, comm, release, gone[static_cast<size_t>(r)]);
    });
  while (ready.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<std::string> states;
  for (int r = 0; r < n; ++r)
    states.push_back(gone[static_cast<size_t>(r)].load() ? "" : dumpState(comms[static_cast<size_t>(r)]));
  release.store(true);
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (!aborted[static_cast<size_t>(r)]) loomCommDestroy(comms[static_cast<size_t>(r)]);
  Report result = report(states);
  std::printf("%s", result.text.c_str());  // what a person reads
  return result;
}

void waitFor(const std::atomic<bool>& release) {
  while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

std::vector<int> ints(const nlohmann::json& j) { return j.get<std::vector<int>>(); }

// Rank 2 skips collective #4 (it stops after #3): ranks 0, 1 and 3 wait in #4 for it.
TEST(HangReport, ARankThatSkipsACollective) {
  const Report r = planted(4, 3, [](int rank, loomComm_t comm, const std::atomic<bool>& release, std::atomic<bool>& /*gone*/) {
    std::vector<float> data(1000, 1.0f);
    if (rank == 2) {
      waitFor(release);
      loomCommAbort(comm);  // then leaves: the others' #4 fails, which ends the test
      return true;
    }
    loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum, comm, nullptr);
    return false;
  });
  EXPECT_NE(r.text.find("oldest operation not finished everywhere: #4 AllReduce of 1000 x float"), std::string::npos)
      << r.text;
  EXPECT_NE(r.text.find("NEVER ENTERED: rank 2 (its last operation: #3 AllReduce"), std::string::npos) << r.text;
  const auto& o = r.json.at("oldest_unfinished");
  EXPECT_EQ(o.at("seq"), 4);
  EXPECT_EQ(ints(o.at("never_entered")), std::vector<int>({2}));
  EXPECT_EQ(ints(o.at("waiting")), std::vector<int>({0, 1, 3}));
  EXPECT_TRUE(o.at("mismatched").empty());
}

// Rank 0 is stuck in compute before #2 while the others wait in it (the same, seen from a report: it
// never entered #2 and its last operation finished).
TEST(HangReport, ARankStuckInCompute) {
  const Report r = planted(3, 1, [](int rank, loomComm_t comm, const std::atomic<bool>& release, std::atomic<bool>& /*gone*/) {
    std::vector<float> data(1000, 1.0f);
    if (rank == 0) waitFor(release);  // "computing"
    EXPECT_EQ(loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum, comm, nullptr), loomSuccess);
    return false;
  });
  EXPECT_NE(r.text.find("NEVER ENTERED: rank 0"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("finished): the ranks waiting in #2 wait for it"), std::string::npos) << r.text;
  EXPECT_EQ(ints(r.json.at("oldest_unfinished").at("waiting")), std::vector<int>({1, 2}));
}

// Rank 1 calls a broadcast of another size at #3 where the others allreduce.
TEST(HangReport, ARankThatCalledAnotherCollective) {
  const Report r = planted(3, 2, [](int rank, loomComm_t comm, const std::atomic<bool>& release, std::atomic<bool>& /*gone*/) {
    std::vector<float> data(1000, 1.0f);
    if (rank == 1) {
      std::thread aborter([&release, comm] {
        waitFor(release);
        loomCommAbort(comm);  // releases its broadcast and the mismatched ranks
      });
      loomBroadcast(data.data(), data.data(), 500, loomFloat32, 0, comm, nullptr);
      aborter.join();
      return true;
    }
    loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum, comm, nullptr);
    return false;
  });
  EXPECT_NE(r.text.find("MISMATCH: rank 1 called Broadcast of 500 x float"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("at #3 where the others called AllReduce of 1000 x float"), std::string::npos) << r.text;
  const auto& mismatched = r.json.at("oldest_unfinished").at("mismatched");
  ASSERT_EQ(mismatched.size(), 1u) << r.json.dump();
  EXPECT_EQ(mismatched[0].at("rank"), 1);
}

// A rank that died: the others' states carry the error naming it; a rank whose state could not be
// read is listed as unreachable.
TEST(HangReport, ADeadRankAndAnUnreachableOne) {
  const Report r = planted(3, 1, [](int rank, loomComm_t comm, const std::atomic<bool>& release, std::atomic<bool>& gone) {
    std::vector<float> data(1000, 1.0f);
    if (rank == 2) {
      gone.store(true);
      loomCommAbort(comm);  // fails: its peers' next collective errs, naming it
      waitFor(release);
      return true;
    }
    EXPECT_NE(loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum, comm, nullptr), loomSuccess);
    waitFor(release);
    return false;
  });
  EXPECT_NE(r.text.find("rank 0 failed:"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("rank 2"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("UNREACHABLE: 2"), std::string::npos) << r.text;
  EXPECT_EQ(r.json.at("failures").size(), 2u);
  EXPECT_EQ(ints(r.json.at("unreachable")), std::vector<int>({2}));
  std::vector<std::string> none = {"", "", ""};
  const Report unreachable = report(none);
  EXPECT_NE(unreachable.text.find("UNREACHABLE: 0, 1, 2"), std::string::npos) << unreachable.text;
}

TEST(HangReport, BadInputIsRefusedNamingIt) {
  const char* states[] = {"{\"not\": \"a state\"}"};
  size_t bytes = 100;
  char out[100];
  EXPECT_EQ(loomHangReport(states, 1, LOOM_REPORT_TEXT, out, &bytes), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("rank 0's state"), std::string::npos);
  EXPECT_EQ(loomHangReport(states, 1, 7, out, &bytes), loomInvalidArgument);
  EXPECT_EQ(loomCommDumpState(nullptr, out, &bytes), loomInvalidArgument);
}

}  // namespace
