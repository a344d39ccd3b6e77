// The host's work per device collective: how long one loomAllReduce on device buffers takes to enqueue
// (the caller's time in the call; the kernel runs later), for 1 rank and for 2 rank threads sharing GPU
// 0 as plan kernels. Each rank's calls are timed one by one in rounds that start at a barrier; between
// rounds the stream is drained, untimed (the launch ring holds 64 launches). A benchmark, with a
// ratchet mode for CI.
//
// Linked against FakeCuda (launch-cost-fakecuda; tests/fakecuda) it also counts, per steady call, the
// CUDA runtime and driver calls by entry point and the heap allocations the calling thread makes
// outside FakeCuda, and subtracts FakeCuda's own time in those calls from each call's time (its
// runtime is a host program, not the driver: what is left is Loom's work). Linked against CUDA
// (launch-cost) it times the calls only.
//
//   launch-cost-fakecuda [--ranks 1,2] [--bytes 8,64M] [--rounds 20] [--calls 50] [--json FILE]
//                        [--max-cuda-calls N] [--max-allocations X]
//
// --max-*: exit 1 when a steady call makes more than N CUDA calls or heap allocations (FakeCuda only).
#include <CLI/CLI.hpp>
#include <cxxabi.h>
#include <execinfo.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <loom.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#ifdef LOOM_FAKE_CUDA
#include "fake_counters.h"
#endif

namespace {

// ---- Heap allocations of the timed calls: counted on the thread that makes them, outside FakeCuda;
// with --where, also by call site (the caller's frames, symbolized at the end).
thread_local bool tlsCounting = false;
thread_local uint64_t tlsAllocations = 0;
bool gWhere = false;
std::mutex gSitesMutex;
std::map<std::vector<void*>, uint64_t>* gSites = nullptr;  // frames -> allocations

void countAllocation() {
#ifdef LOOM_FAKE_CUDA
  if (fakecuda::insideFakeCuda()) return;
#endif
  if (!tlsCounting) return;
  ++tlsAllocations;
  if (!gWhere) return;
  tlsCounting = false;  // the bookkeeping below allocates
  void* frames[8];
  const int n = backtrace(frames, 8);
  {
    std::lock_guard<std::mutex> lock(gSitesMutex);
    if (!gSites) gSites = new std::map<std::vector<void*>, uint64_t>;
    ++(*gSites)[std::vector<void*>(frames + std::min(n, 2), frames + n)];  // past operator new itself
  }
  tlsCounting = true;
}

}  // namespace

void* operator new(size_t bytes) {
  countAllocation();
  if (void* p = std::malloc(bytes ? bytes : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t bytes) { return operator new(bytes); }
void* operator new(size_t bytes, std::align_val_t align) {
  countAllocation();
  const size_t a = static_cast<size_t>(align);
  if (void* p = std::aligned_alloc(a, (std::max<size_t>(bytes, 1) + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t bytes, std::align_val_t align) { return operator new(bytes, align); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

struct Options {
  std::vector<int> ranks{1, 2};
  std::vector<uint64_t> bytes{8, uint64_t{64} << 20};
  int warmup = 20;
  int rounds = 20;
  int calls = 50;
  std::string json;
  int64_t maxCudaCalls = -1;
  double maxAllocations = -1;  // on average per steady call (a rare one, such as a ring's growth, is a fraction)
};

struct Sample {
  double us = 0;      // the call, as the caller saw it
  double hostUs = 0;  // less FakeCuda's own time in it (the same as us against CUDA)
  uint64_t allocations = 0;
};

uint64_t nowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

uint64_t fakeNs() {
#ifdef LOOM_FAKE_CUDA
  return fakecuda::threadFakeCudaNs();
#else
  return 0;
#endif
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "launch-cost: %s\n", what.c_str());
  std::exit(2);
}

void cudaOrDie(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

struct Result {
  int ranks = 0;
  uint64_t bytes = 0;
  std::vector<std::vector<Sample>> perRank;
  std::map<std::string, double> callsPerCall;  // FakeCuda: entry point -> calls per steady call
  double cudaCallsPerCall = 0;
};

Result measure(const Options& o, int nranks, uint64_t bytes) {
  Result result;
  result.ranks = nranks;
  result.bytes = bytes;
  result.perRank.resize(static_cast<size_t>(nranks));
  std::vector<int> devices(static_cast<size_t>(nranks), 0);
  std::vector<loomComm_t> comms(static_cast<size_t>(nranks));
  if (loomCommInitAll(comms.data(), nranks, devices.data()) != loomSuccess)
    die(fmt::format("loomCommInitAll of {} rank(s): {}", nranks, loomGetLastError(nullptr)));
  const size_t count = std::max<uint64_t>(1, bytes / sizeof(float));
  std::barrier<> meet(nranks);
  std::atomic<bool> failed{false};
  auto rank = [&](int r) {
    cudaOrDie(cudaSetDevice(0), "cudaSetDevice");
    cudaStream_t stream = nullptr;
    cudaOrDie(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    void* send = nullptr;
    void* recv = nullptr;
    cudaOrDie(cudaMalloc(&send, count * sizeof(float)), "cudaMalloc");
    cudaOrDie(cudaMalloc(&recv, count * sizeof(float)), "cudaMalloc");
    cudaOrDie(cudaMemset(send, 0, count * sizeof(float)), "cudaMemset");
    meet.arrive_and_wait();  // every rank's allocations before any launch (cudaMalloc waits for the device)
    loomComm_t comm = comms[static_cast<size_t>(r)];
    auto call = [&] {
      if (loomAllReduce(send, recv, count, loomFloat32, loomSum, comm, stream) != loomSuccess) {
        std::fprintf(stderr, "launch-cost: rank %d: %s\n", r, loomGetLastError(comm));
        failed = true;
      }
    };
    for (int i = 0; i < o.warmup; ++i) call();
    cudaOrDie(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    meet.arrive_and_wait();
#ifdef LOOM_FAKE_CUDA
    if (r == 0) fakecuda::resetCallCounts();
#endif
    meet.arrive_and_wait();
    std::vector<Sample>& samples = result.perRank[static_cast<size_t>(r)];
    for (int round = 0; round < o.rounds && !failed; ++round) {
      meet.arrive_and_wait();
      for (int c = 0; c < o.calls; ++c) {
        tlsAllocations = 0;
        tlsCounting = true;
        const uint64_t fake0 = fakeNs();
        const uint64_t t0 = nowNs();
        call();
        const uint64_t t1 = nowNs();
        const uint64_t fake1 = fakeNs();
        tlsCounting = false;
        samples.push_back({(t1 - t0) / 1e3, (t1 - t0 - (fake1 - fake0)) / 1e3, tlsAllocations});
      }
      // Not timed: the launch ring has room for the next round. (FakeCuda counts these calls too; a
      // steady call's share is what is left after taking them out, below.)
      cudaOrDie(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    meet.arrive_and_wait();
#ifdef LOOM_FAKE_CUDA
    if (r == 0) {
      const double calls = static_cast<double>(nranks) * o.rounds * o.calls;
      for (const fakecuda::EntryCount& e : fakecuda::entryCounts()) {
        double n = static_cast<double>(e.calls);
        // The drain between rounds is the benchmark's, not the call's.
        if (std::string(e.name) == "cudaStreamSynchronize") n -= static_cast<double>(nranks) * o.rounds;
        if (n > 0) result.callsPerCall[e.name] = n / calls;
      }
      for (const auto& [name, n] : result.callsPerCall) result.cudaCallsPerCall += n;
    }
#endif
    meet.arrive_and_wait();
    cudaFree(send);
    cudaFree(recv);
    cudaStreamDestroy(stream);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(rank, r);
  for (std::thread& t : threads) t.join();
  for (loomComm_t c : comms) loomCommDestroy(c);
  if (failed) die("a call failed");
  return result;
}

std::string sizeText(uint64_t b) {
  if (b >= (uint64_t{1} << 30) && b % (uint64_t{1} << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= (uint64_t{1} << 20) && b % (uint64_t{1} << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"The host's work per device collective (loomAllReduce enqueue time), per call"};
  app.add_option("--ranks", o.ranks, "rank counts (rank threads sharing GPU 0), comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 8));
  app.add_option("--bytes", o.bytes, "sizes, comma-separated, K/M/G suffixes (default 8,64M)")
      ->delimiter(',')
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--warmup", o.warmup, "calls before the timed rounds")->check(CLI::Range(1, 100000));
  app.add_option("--rounds", o.rounds, "timed rounds, each started at a barrier")->check(CLI::Range(1, 100000));
  app.add_option("--calls", o.calls, "calls per round (at most 60: the launch ring holds 64)")->check(CLI::Range(1, 60));
  app.add_option("--json", o.json, "also write one JSON object per line (rank count and size) here");
  app.add_option("--max-cuda-calls", o.maxCudaCalls, "FakeCuda: fail when a steady call makes more CUDA calls");
  app.add_option("--max-allocations", o.maxAllocations, "fail when a steady call makes more heap allocations");
  app.add_flag("--where", gWhere, "print where the timed calls allocate (call sites, per call)");
  CLI11_PARSE(app, argc, argv);
  // Rank threads sharing a GPU run plan kernels only when asked (LOOM_DEVICE_PLANS); this measures them.
  setenv("LOOM_DEVICE_PLANS", "require", 0);

  std::ofstream json;
  if (!o.json.empty()) json.open(o.json);
  int status = 0;
#ifdef LOOM_FAKE_CUDA
  const char* runtime = "FakeCuda";
#else
  const char* runtime = "CUDA";
#endif
  std::printf("# launch cost on %s: %d warm-up call(s), %d round(s) of %d call(s) per rank\n", runtime, o.warmup,
              o.rounds, o.calls);
  std::printf("# %5s %8s %10s %10s %12s %12s %12s %12s\n", "ranks", "bytes", "p50 us", "p99 us", "host p50 us",
              "host p99 us", "CUDA calls", "allocations");
  for (int nranks : o.ranks)
    for (uint64_t bytes : o.bytes) {
      const Result r = measure(o, nranks, bytes);
      nlohmann::ordered_json row;
      row["tool"] = "launch_cost";
      row["runtime"] = runtime;
      row["collective"] = "all_reduce";
      row["ranks"] = nranks;
      row["bytes"] = bytes;
      double worstP50 = 0, worstP99 = 0, worstHostP50 = 0, worstHostP99 = 0, allocations = 0;
      size_t samples = 0;
      nlohmann::ordered_json perRank = nlohmann::ordered_json::array();
      for (const std::vector<Sample>& s : r.perRank) {
        std::vector<double> us, host;
        for (const Sample& x : s) {
          us.push_back(x.us);
          host.push_back(x.hostUs);
          allocations += static_cast<double>(x.allocations);
        }
        samples += s.size();
        const double p50 = percentile(us, 0.5), p99 = percentile(us, 0.99);
        const double h50 = percentile(host, 0.5), h99 = percentile(host, 0.99);
        perRank.push_back({{"p50_us", p50}, {"p99_us", p99}, {"host_p50_us", h50}, {"host_p99_us", h99}});
        worstP50 = std::max(worstP50, p50);
        worstP99 = std::max(worstP99, p99);
        worstHostP50 = std::max(worstHostP50, h50);
        worstHostP99 = std::max(worstHostP99, h99);
      }
      const double allocationsPerCall = samples ? allocations / static_cast<double>(samples) : 0;
      row["p50_us"] = worstP50;
      row["p99_us"] = worstP99;
      row["host_p50_us"] = worstHostP50;
      row["host_p99_us"] = worstHostP99;
      row["per_rank"] = perRank;
      row["allocations_per_call"] = allocationsPerCall;
#ifdef LOOM_FAKE_CUDA
      row["cuda_calls_per_call"] = r.cudaCallsPerCall;
      row["cuda_calls_by_entry"] = r.callsPerCall;
#endif
      std::printf("  %5d %8s %10.2f %10.2f %12.2f %12.2f %12.2f %12.2f\n", nranks, sizeText(bytes).c_str(), worstP50,
                  worstP99, worstHostP50, worstHostP99, r.cudaCallsPerCall, allocationsPerCall);
      for (const auto& [name, n] : r.callsPerCall) std::printf("  %31s %-40s %.2f\n", "", name.c_str(), n);
      if (json.is_open()) json << row.dump() << "\n";
#ifdef LOOM_FAKE_CUDA
      if (o.maxCudaCalls >= 0 && r.cudaCallsPerCall > static_cast<double>(o.maxCudaCalls) + 1e-9) {
        std::printf("FAIL %d rank(s), %s: %.2f CUDA calls per steady call, more than %lld\n", nranks,
                    sizeText(bytes).c_str(), r.cudaCallsPerCall, static_cast<long long>(o.maxCudaCalls));
        status = 1;
      }
#endif
      if (o.maxAllocations >= 0 && allocationsPerCall > o.maxAllocations + 1e-9) {
        std::printf("FAIL %d rank(s), %s: %.2f heap allocations per steady call, more than %.2f\n", nranks,
                    sizeText(bytes).c_str(), allocationsPerCall, o.maxAllocations);
        status = 1;
      }
    }
  if (gWhere && gSites) {
    // One line per call site: allocations per timed call, then the frames (function names where the
    // dynamic symbol table has them; the library's are hidden: addr2line -Cfe BINARY OFFSET names them).
    uint64_t timed = 0;
    for (int nranks : o.ranks) timed += static_cast<uint64_t>(nranks) * o.bytes.size() * o.rounds * o.calls;
    std::vector<std::pair<uint64_t, std::vector<void*>>> sites;
    for (const auto& [frames, n] : *gSites) sites.push_back({n, frames});
    std::sort(sites.begin(), sites.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::printf("# allocation sites (allocations per timed call)\n");
    for (const auto& [n, frames] : sites) {
      std::printf("%8.2f", static_cast<double>(n) / static_cast<double>(timed));
      char** names = backtrace_symbols(frames.data(), static_cast<int>(frames.size()));
      for (size_t i = 0; i < frames.size() && i < 4; ++i) {
        std::string text = names ? names[i] : "?";
        const size_t open = text.find('('), plus = text.find('+', open);
        if (open != std::string::npos && plus != std::string::npos && plus > open + 1) {
          int ok = -1;
          char* demangled = abi::__cxa_demangle(text.substr(open + 1, plus - open - 1).c_str(), nullptr, nullptr, &ok);
          if (ok == 0) text = std::string(demangled).substr(0, 110);
          std::free(demangled);
        }
        std::printf("  %s%s", i ? "<- " : "", text.c_str());
      }
      std::printf("\n");
      std::free(names);
    }
  }
  return status;
}
