// The network lanes' proxy (transport/net/fifo_proxy.h) over every provider of the conformance suite
// (provider_cases.h: socket, ucx, ib over FakeVerbs and, in the Soft-RoCE VM, real verbs): two ranks
// as threads of this process (ThreadExchange), each with FIFOs in host memory, and the test playing the
// plan kernel's side of each FIFO with the counters protocol of kernels/cuda/plan_interpreter.cuh
// (write a slot and its size word, raise tail with release; read, raise head). Checked: every message
// arrives intact and in order both ways on every channel, a receiver slower than its sender never has
// a slot overwritten, a peer that leaves is named by the survivor's failure, a rank that cannot make
// its FIFOs fails every rank's start, and an idle proxy sleeps.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "provider_cases.h"
#include "thread_exchange.h"
#include "transport/net/fifo_proxy.h"
#include "transport/net/net_setup.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kStride = 3;        // channels of the tables; the lanes use the first kLaneChannels
constexpr uint32_t kLaneChannels = 2;
constexpr uint32_t kSlots = 3;
constexpr size_t kSlotBytes = 4096;

// One rank's FIFOs with its single peer, in host memory laid out as the device layer lays them out.
struct RankFifos {
  std::vector<std::unique_ptr<cuda::DeviceFifoCounter[]>> counters;
  std::vector<std::unique_ptr<uint64_t[]>> sizes;
  std::vector<std::vector<char>> slots;
  net::ProxiedFifos tables;

  RankFifos(int peer, int nranks) {
    tables.nchannels = kStride;
    tables.laneChannels = kLaneChannels;
    tables.sends.assign(static_cast<size_t>(nranks) * kStride, cuda::DeviceFifo{});
    tables.recvs = tables.sends;
    for (uint32_t c = 0; c < kLaneChannels; ++c) {
      tables.sends[peer * kStride + c] = make();
      tables.recvs[peer * kStride + c] = make();
    }
  }
  cuda::DeviceFifo make() {
    counters.emplace_back(new cuda::DeviceFifoCounter[2]);
    sizes.emplace_back(new uint64_t[kSlots]());
    slots.emplace_back(kSlots * kSlotBytes, '\0');
    cuda::DeviceFifo f;
    f.tail = &counters.back()[0].value;
    f.head = &counters.back()[1].value;
    f.sizes = sizes.back().get();
    f.slots = slots.back().data();
    f.slotBytes = kSlotBytes;
    f.nslots = kSlots;
    return f;
  }
};

uint64_t acquire(uint64_t* w) { return std::atomic_ref<uint64_t>(*w).load(std::memory_order_acquire); }
void release(uint64_t* w, uint64_t v) { std::atomic_ref<uint64_t>(*w).store(v, std::memory_order_release); }

// The kernel's side: waits (politely, up to 20 s) for room, writes the message, publishes it.
bool kernelSend(const cuda::DeviceFifo& f, const std::vector<char>& message) {
  const uint64_t seq = acquire(f.tail);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (acquire(f.head) + f.nslots <= seq)
    if (Clock::now() > deadline) return false;
    else std::this_thread::yield();
  if (!message.empty()) std::memcpy(f.slots + (seq % f.nslots) * f.slotBytes, message.data(), message.size());
  f.sizes[seq % f.nslots] = message.size();
  release(f.tail, seq + 1);
  return true;
}

bool kernelRecv(const cuda::DeviceFifo& f, std::vector<char>* message) {
  const uint64_t seq = acquire(f.head);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (acquire(f.tail) <= seq)
    if (Clock::now() > deadline) return false;
    else std::this_thread::yield();
  const uint64_t bytes = f.sizes[seq % f.nslots];
  const char* slot = f.slots + (seq % f.nslots) * f.slotBytes;
  message->assign(slot, slot + bytes);
  release(f.head, seq + 1);
  return true;
}

// Message `seq` from `rank` on `channel`: a size that varies (0 and a full slot included) and bytes
// that name where it came from.
std::vector<char> messageOf(int rank, uint32_t channel, int seq) {
  const size_t bytes = seq % 7 == 0 ? 0 : seq % 5 == 0 ? kSlotBytes : (seq * 613u) % kSlotBytes;
  std::vector<char> m(bytes);
  for (size_t i = 0; i < bytes; ++i) m[i] = static_cast<char>(rank * 31 + channel * 7 + seq + i * 13);
  return m;
}

// The proxy is the last member, so destroyed first: its thread may report a failure (the peer's
// proxy went first) until it is joined, into the FIFOs and the list it must not outlive.
struct Rank {
  std::unique_ptr<RankFifos> fifos;
  Status started;
  std::mutex mutex;
  std::vector<std::string> failures;  // what onFailure reported, under `mutex`
  std::unique_ptr<net::FifoProxy> proxy;

  std::vector<std::string> failuresSoFar() {
    std::lock_guard<std::mutex> lock(mutex);
    return failures;
  }
};

// Starts both ranks' proxies over the provider on loopback; `localError[r]` is rank r's.
void startBoth(const net::ProviderCase& pc, Rank (&ranks)[2],
               const Status (&localError)[2] = {Status::Ok(), Status::Ok()}) {
  ThreadExchange::Shared shared(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      Rank& me = ranks[r];
      me.fifos = std::make_unique<RankFifos>(1 - r, 2);
      ThreadExchange exchange(&shared, r);
      std::unique_ptr<net::Provider> provider;
      Status made = pc.make(&provider);
      int device = 0;
      if (made.ok()) made = net::chooseDevice(*provider, pc.deviceSpec, &device);
      Status local = localError[r].ok() ? made : localError[r];
      if (!local.ok()) provider.reset();
      net::ProxiedFifos tables = me.fifos->tables;
      if (!localError[r].ok()) {  // a rank that could not make its FIFOs: no tables, the same channel count
        tables = net::ProxiedFifos{};
        tables.laneChannels = kLaneChannels;
      }
      me.started = net::FifoProxy::start(exchange, std::move(provider), local, device, tables, 10000,
                                         [&me](int, const Status& s) {
                                           std::lock_guard<std::mutex> lock(me.mutex);
                                           me.failures.push_back(s.message());
                                         },
                                         &me.proxy);
    });
  for (std::thread& t : threads) t.join();
}

// The case's environment is set before any thread starts and kept until the proxies are gone.
class FifoProxy : public ::testing::TestWithParam<net::ProviderCase> {
 protected:
  void SetUp() override { environment_ = std::make_unique<net::CaseEnvironment>(GetParam()); }
  std::unique_ptr<net::CaseEnvironment> environment_;
};

TEST_P(FifoProxy, MessagesCrossBothWaysInOrderOnEveryChannel) {
  Rank ranks[2];
  startBoth(GetParam(), ranks);
  ASSERT_TRUE(ranks[0].started.ok()) << ranks[0].started.message();
  ASSERT_TRUE(ranks[1].started.ok()) << ranks[1].started.message();
  constexpr int kMessages = 120;
  std::atomic<int> bad{0};
  std::mutex problemsMutex;
  std::string problems;
  std::vector<std::thread> kernels;
  for (int r = 0; r < 2; ++r)
    for (uint32_t c = 0; c < kLaneChannels; ++c) {
      const size_t i = static_cast<size_t>(1 - r) * kStride + c;
      kernels.emplace_back([&, r, c, i] {
        for (int seq = 0; seq < kMessages; ++seq)
          if (!kernelSend(ranks[r].fifos->tables.sends[i], messageOf(r, c, seq))) {
            ++bad;
            std::lock_guard<std::mutex> lock(problemsMutex);
            problems += "rank " + std::to_string(r) + " channel " + std::to_string(c) + ": no room for message " +
                        std::to_string(seq) + "; ";
            return;
          }
      });
      kernels.emplace_back([&, r, c, i] {
        // Channel 0's receivers start late: their senders fill the FIFO and must wait for the slots.
        if (c == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        for (int seq = 0; seq < kMessages; ++seq) {
          std::vector<char> got;
          const bool arrived = kernelRecv(ranks[r].fifos->tables.recvs[i], &got);
          if (arrived && got == messageOf(1 - r, c, seq)) continue;
          ++bad;
          std::lock_guard<std::mutex> lock(problemsMutex);
          problems += "rank " + std::to_string(r) + " channel " + std::to_string(c) + ": message " +
                      std::to_string(seq) + (arrived ? " differs" : " never came") + "; ";
          return;
        }
      });
    }
  for (std::thread& t : kernels) t.join();
  EXPECT_EQ(bad.load(), 0) << problems;
  for (Rank& r : ranks) {
    const std::vector<std::string> failures = r.failuresSoFar();
    EXPECT_TRUE(failures.empty()) << failures.front();
  }
  // The unused channel's FIFOs were never touched.
  for (Rank& r : ranks) {
    const cuda::DeviceFifo& unused = r.fifos->tables.recvs[(&r == &ranks[0] ? 1 : 0) * kStride + 2];
    EXPECT_FALSE(unused.present());
  }
}

TEST_P(FifoProxy, APeerThatLeavesIsNamed) {
  Rank ranks[2];
  startBoth(GetParam(), ranks);
  ASSERT_TRUE(ranks[0].started.ok() && ranks[1].started.ok()) << ranks[0].started.message();
  ranks[1].proxy.reset();  // its comms close
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::string reported;
  while (Clock::now() < deadline && reported.empty()) {
    if (const std::vector<std::string> failures = ranks[0].failuresSoFar(); !failures.empty()) reported = failures.front();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_NE(reported.find("rank 1"), std::string::npos) << "reported: '" << reported << "'";
  EXPECT_EQ(ranks[0].failuresSoFar().size(), 1u) << "reported once";
}

TEST_P(FifoProxy, ARankWithoutFifosFailsEveryRanksStart) {
  Rank ranks[2];
  startBoth(GetParam(), ranks, {Status::Ok(), errorStatus(loomSystemError, "no pinned memory left")});
  EXPECT_FALSE(ranks[1].started.ok());
  EXPECT_NE(ranks[1].started.message().find("no pinned memory left"), std::string::npos) << ranks[1].started.message();
  EXPECT_FALSE(ranks[0].started.ok());
  EXPECT_NE(ranks[0].started.message().find("rank 1"), std::string::npos) << ranks[0].started.message();
  EXPECT_NE(ranks[0].started.message().find("no pinned memory left"), std::string::npos) << ranks[0].started.message();
}

double processCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Two idle proxies (receives posted, nothing arriving) sleep: far less than a core between them.
TEST_P(FifoProxy, AnIdleProxySleeps) {
  Rank ranks[2];
  startBoth(GetParam(), ranks);
  ASSERT_TRUE(ranks[0].started.ok() && ranks[1].started.ok()) << ranks[0].started.message();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the yielding passes and the short naps
  const double before = processCpuSeconds();
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = processCpuSeconds() - before;
  EXPECT_LT(cpu, 0.25 * wall) << cpu << " s of CPU in " << wall << " s";
  ranks[0].proxy->wake();  // and a wake-up is harmless
}

INSTANTIATE_TEST_SUITE_P(Providers, FifoProxy, ::testing::ValuesIn(net::providerCases()),
                         [](const ::testing::TestParamInfo<net::ProviderCase>& info) { return info.param.label; });

}  // namespace
}  // namespace loom
