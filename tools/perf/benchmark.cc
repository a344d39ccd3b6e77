#include "benchmark.h"

#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>

#include "check.h"
#include "device_buffers.h"
#include "element_codec.h"
#include "loom_error.h"
#include "report.h"

namespace loomperf {
namespace {

constexpr size_t kRankLineBytes = 256;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<unsigned char, FreeDeleter>;

// Page-aligned and touched, so that page faults stay out of the timings.
HostBuffer allocateTouched(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, std::max<size_t>(bytes, 64)) != 0) throw std::bad_alloc();
  std::memset(p, 0, std::max<size_t>(bytes, 64));
  return HostBuffer(static_cast<unsigned char*>(p));
}

// A reduction operator for one (type, op) block: a PreMulSum is created on the communicator with
// this rank's scalar and destroyed afterwards.
class ScopedRedOp {
 public:
  ScopedRedOp(RedOp op, loomDataType_t type, int rank, loomComm_t comm) : comm_(comm) {
    switch (op) {
      case RedOp::Sum:
      case RedOp::None:
        op_ = loomSum;
        break;
      case RedOp::Prod:
        op_ = loomProd;
        break;
      case RedOp::Max:
        op_ = loomMax;
        break;
      case RedOp::Min:
        op_ = loomMin;
        break;
      case RedOp::Avg:
        op_ = loomAvg;
        break;
      case RedOp::PreMulSum: {
        alignas(8) unsigned char scalar[8] = {};
        visitCodec(type, [&](auto codec) {
          const auto v = decltype(codec)::encode(ValuePattern::preMulScalar(rank));
          std::memcpy(scalar, &v, sizeof v);
        });
        check(loomRedOpCreatePreMulSum(&op_, scalar, type, loomScalarHostImmediate, comm),
              "loomRedOpCreatePreMulSum", comm);
        custom_ = true;
        break;
      }
    }
  }
  ~ScopedRedOp() {
    if (custom_) loomRedOpDestroy(op_, comm_);
  }
  ScopedRedOp(const ScopedRedOp&) = delete;
  ScopedRedOp& operator=(const ScopedRedOp&) = delete;
  loomRedOp_t get() const { return op_; }

 private:
  loomComm_t comm_;
  loomRedOp_t op_ = loomSum;
  bool custom_ = false;
};

struct TestCase {
  loomDataType_t type;
  RedOp op;
  loomRedOp_t loomOp;
  const ValuePattern* pattern;
  Layout layout;
  RankView view;
};

class RankBenchmark {
 public:
  RankBenchmark(const Options& options, loomComm_t comm, int rank, int nranks)
      : o_(options),
        coll_(*options.collective),
        comm_(comm),
        rank_(rank),
        nranks_(nranks),
        send_(allocateTouched(options.maxBytes)),
        recv_(allocateTouched(options.maxBytes)),
        device_(options.cudaDevice, options.maxBytes, rank, send_.get(), recv_.get()) {}

  int64_t run() {
    const std::vector<int> testRoots = roots();  // rejects a bad -r before any output
    std::optional<Report> report;
    if (rank_ == 0) report.emplace(o_, nranks_);
    const std::vector<std::string> rankLines = gatherRankLines();
    if (report) report->header(rankLines);

    for (loomDataType_t type : o_.types) {
      for (RedOp op : coll_.reduces ? o_.ops : std::vector<RedOp>{RedOp::None}) {
        for (int root : testRoots) {
          const ValuePattern pattern(type, op, nranks_);
          const ScopedRedOp loomOp(op, type, rank_, comm_);
          for (size_t size : testSizes(o_)) {
            const size_t elt = dataTypeInfo(type).size;
            const Layout layout = coll_.layout(size / elt, nranks_);
            const TestCase test{type,     op,     loomOp.get(),
                                &pattern, layout, RankView{rank_, nranks_, root, layout.paramCount}};
            ResultRow row{std::max(layout.sendCount, layout.recvCount) * elt,
                          layout.paramCount,
                          type,
                          op,
                          root,
                          measure(test, false),
                          measure(test, true)};
            if (report) report->row(row);
            for (const Measurement* m : {&row.outOfPlace, &row.inPlace})
              wrong_ += std::max<int64_t>(m->wrong, 0);
          }
        }
      }
    }
    if (report && !report->finish()) throw std::runtime_error("cannot write the JSON report");
    return wrong_;
  }

 private:
  std::vector<int> roots() const {
    if (!coll_.rooted) return {-1};
    if (o_.root >= nranks_)
      throw std::runtime_error(fmt::format("root {} is out of range for {} ranks", o_.root, nranks_));
    if (!o_.allRoots) return {o_.root};
    std::vector<int> all(nranks_);
    for (int r = 0; r < nranks_; ++r) all[r] = r;
    return all;
  }

  Measurement measure(const TestCase& t, bool inPlace) {
    const size_t elt = dataTypeInfo(t.type).size;
    const BufferView buffers{
        inPlace ? recv_.get() + t.layout.sendInplaceOffset * rank_ * elt : send_.get(),
        t.layout.sendCount,
        inPlace ? recv_.get() + t.layout.recvInplaceOffset * rank_ * elt : recv_.get(),
        t.layout.recvCount,
    };
    const BufferView onDevice = device_.map(buffers);  // -G cuda; else the host buffers
    const OpCall call{onDevice.send, onDevice.recv, t.type, t.loomOp, t.view, comm_,
                      static_cast<loomStream_t>(device_.stream())};
    auto runOnce = [&] { check(coll_.run(call), coll_.apiName, comm_); };
    auto iteration = [&] {
      if (o_.aggIters == 1) return runOnce();
      check(loomGroupStart(), "loomGroupStart", comm_);
      for (int a = 0; a < o_.aggIters; ++a) runOnce();
      check(loomGroupEnd(), "loomGroupEnd", comm_);
    };

    prepareBuffers(t.type, *t.pattern, t.view, buffers);  // keeps timed arithmetic on finite values
    device_.upload(buffers, elt);
    for (int i = 0; i < o_.warmupIters; ++i) iteration();
    device_.synchronize();
    barrier();
    // --percentiles: each iteration's end is stamped; with -G cuda after waiting for its stream (the
    // loop would only enqueue otherwise), so iterations do not overlap there.
    const bool stamp = o_.percentiles;
    if (stamp) iterationEnds_.assign(static_cast<size_t>(o_.iters), 0.0);
    readDeviceProfile();  // the warm-up's launches out of the timed iterations' figures
    auto start = std::chrono::steady_clock::now();
    int launches = 1;  // of the timed loop: -G N replays it N times
    if (o_.graphLaunches > 0) {
      // As nccl-tests' -G: the loop's iterations captured once (nothing runs yet), then the graph
      // launched N times, the clock started once every rank has captured.
      launches = o_.graphLaunches;
      device_.replayCaptured(
          launches, [&] { for (int i = 0; i < o_.iters; ++i) iteration(); },
          [&] {
            barrier();  // every rank's graph exists before any rank launches its own
            start = std::chrono::steady_clock::now();
          });
    } else {
      for (int i = 0; i < o_.iters; ++i) {
        iteration();
        if (stamp) {
          device_.synchronize();
          iterationEnds_[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
        if (o_.blocking == 1) barrier();
      }
    }
    device_.synchronize();  // -G cuda: the loop only enqueued
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    const double seconds =
        combineTime(elapsed.count() / (static_cast<double>(o_.iters) * o_.aggIters * launches));
    const Percentiles spread = stamp ? iterationPercentiles() : Percentiles{};
    const loomDeviceProfile_t profile = readDeviceProfile();

    int64_t wrong = -1;
    if (o_.checkIters > 0) {
      uint64_t local = 0;
      for (int c = 0; c < o_.checkIters; ++c) {
        prepareBuffers(t.type, *t.pattern, t.view, buffers);
        device_.upload(buffers, elt);
        runOnce();
        device_.download(buffers, elt);
        local += countWrong(coll_, t.type, *t.pattern, t.view, buffers);
      }
      wrong = sumAcrossRanks(static_cast<int64_t>(local));
    }
    const double algBw = seconds > 0 ? static_cast<double>(t.layout.paramCount * elt) *
                                           coll_.algFactor(nranks_) / 1e9 / seconds
                                     : 0;
    return {seconds * 1e6,  algBw,        algBw * coll_.busFactor(nranks_),
            wrong,          spread.p50Us, spread.p99Us,
            spread.maxUs,   profile};
  }

  // -G cuda: what this communicator's plan kernels timed since the last read (LOOM_DEVICE_PROFILE=1,
  // loomCommDeviceProfile, then reset), summed over the ranks; zeros where a rank does not profile.
  // Every rank calls it (the sum is a collective), so only -G decides, as it does on every rank.
  loomDeviceProfile_t readDeviceProfile() {
    loomDeviceProfile_t p = {};
    if (!device_.enabled()) return p;
    if (loomCommDeviceProfile(comm_, &p, 1) != loomSuccess) p = {};  // not profiled: nothing to add
    uint64_t words[8] = {p.launches, p.lanes, p.steps, p.bytes, p.waitNs, p.dataNs, p.publishNs, p.laneNs};
    check(loomAllReduce(words, words, 8, loomUint64, loomSum, comm_, nullptr), "loomAllReduce (device profile)",
          comm_);
    return {words[0], words[1], words[2], words[3], words[4], words[5], words[6], words[7]};
  }

  struct Percentiles {
    double p50Us = -1, p99Us = -1, maxUs = -1;
  };

  // Iteration i took from the end of i-1 (the loop's start for the first) to its own end; across ranks
  // an iteration counts as long as its slowest rank's (a collective is as late as its last rank).
  // Nearest-rank percentiles over the iterations, per operation (divided by -m).
  Percentiles iterationPercentiles() {
    std::vector<double> took(iterationEnds_.size());
    for (size_t i = 0; i < took.size(); ++i) took[i] = iterationEnds_[i] - (i ? iterationEnds_[i - 1] : 0.0);
    check(loomAllReduce(took.data(), took.data(), took.size(), loomFloat64, loomMax, comm_, nullptr),
          "loomAllReduce (iteration times)", comm_);
    std::sort(took.begin(), took.end());
    auto at = [&](double q) {
      const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(took.size())));
      return took[std::min(took.size() - 1, rank > 0 ? rank - 1 : 0)] * 1e6 / o_.aggIters;
    };
    return {at(0.50), at(0.99), took.back() * 1e6 / o_.aggIters};
  }

  void barrier() {
    check(loomAllReduce(&barrierWord_, &barrierWord_, 1, loomInt32, loomSum, comm_, nullptr),
          "loomAllReduce (barrier)", comm_);
  }

  double combineTime(double seconds) {
    if (o_.average == Average::Rank0) return seconds;
    const loomRedOp_t op = o_.average == Average::Min   ? loomMin
                           : o_.average == Average::Max ? loomMax
                                                        : loomSum;
    check(loomAllReduce(&seconds, &seconds, 1, loomFloat64, op, comm_, nullptr), "loomAllReduce (time)",
          comm_);
    return o_.average == Average::Mean ? seconds / nranks_ : seconds;
  }

  int64_t sumAcrossRanks(int64_t value) {
    check(loomAllReduce(&value, &value, 1, loomInt64, loomSum, comm_, nullptr), "loomAllReduce (#wrong)",
          comm_);
    return value;
  }

  std::vector<std::string> gatherRankLines() {
    char host[128] = "?";
    gethostname(host, sizeof host - 1);
    const std::string line =
        fmt::format("#  Rank {:2} Group {:2} Pid {:6} on {:>10} device {} [tid {}] {}", rank_, 0, getpid(), host,
                    device_.enabled() ? "cuda" : "cpu", static_cast<long>(syscall(SYS_gettid)), device_.describe());
    std::vector<char> mine(kRankLineBytes, '\0');
    std::memcpy(mine.data(), line.data(), std::min(line.size(), kRankLineBytes - 1));
    std::vector<char> all(kRankLineBytes * nranks_, '\0');
    check(loomAllGather(mine.data(), all.data(), kRankLineBytes, loomInt8, comm_, nullptr),
          "loomAllGather (rank lines)", comm_);
    std::vector<std::string> lines;
    for (int r = 0; r < nranks_; ++r) lines.emplace_back(all.data() + r * kRankLineBytes);
    return lines;
  }

  const Options& o_;
  const Collective& coll_;
  loomComm_t comm_;
  int rank_;
  int nranks_;
  HostBuffer send_;
  HostBuffer recv_;
  DeviceBuffers device_;
  int32_t barrierWord_ = 0;
  std::vector<double> iterationEnds_;  // --percentiles: seconds from the timed loop's start
  int64_t wrong_ = 0;
};

}  // namespace

int64_t runBenchmark(const Options& options, loomComm_t comm, int rank, int nranks) {
  return RankBenchmark(options, comm, rank, nranks).run();
}

}  // namespace loomperf
