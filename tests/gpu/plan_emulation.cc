#include "plan_emulation.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <new>
#include <thread>
#include <tuple>

#include "base/datatype.h"
#include "kernels/cuda/host_lane_platform.h"

namespace loomgpu {

using loom::cuda::DeviceFifo;
using loom::cuda::DeviceLaneStatus;

namespace {
constexpr std::align_val_t kBlockAlign{64};
}

void GuardedBlock::Free::operator()(char* p) const { ::operator delete[](p, kBlockAlign); }

GuardedBlock::GuardedBlock(size_t bytes, size_t shift) : total_(bytes + shift + 2 * kGuard), bytes_(bytes) {
  raw_.reset(static_cast<char*>(::operator new[](total_, kBlockAlign)));
  data_ = raw_.get() + kGuard + shift;
}

void GuardedBlock::copyFrom(const GuardedBlock& other) { std::memcpy(raw_.get(), other.raw_.get(), total_); }

HostFifoMesh::HostFifoMesh(int nranks, uint32_t nchannels, uint32_t nslots, size_t slotBytes, bool directPosts)
    : nranks_(nranks), nchannels_(nchannels) {
  boards_.resize(static_cast<size_t>(nranks));
  for (auto& b : boards_) {
    b.resize(nchannels);
    boardTable_.push_back(b.data());
  }
  fifos_.resize(static_cast<size_t>(nranks) * nranks * nchannels);
  for (int from = 0; from < nranks; ++from)
    for (int to = 0; to < nranks; ++to)
      for (uint32_t c = 0; c < nchannels; ++c) {
        if (from == to) continue;
        auto f = std::make_unique<Fifo>();
        f->slots.resize((nslots * slotBytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
        f->tail = std::make_unique<loom::cuda::DeviceFifoCounter>();
        f->head = std::make_unique<loom::cuda::DeviceFifoCounter>();
        f->sizes.assign(nslots, 0);
        f->view.slots = reinterpret_cast<char*>(f->slots.data());
        f->view.tail = &f->tail->value;
        f->view.head = &f->head->value;
        f->view.sizes = f->sizes.data();
        if (directPosts) {
          f->posts.assign(nslots, {});
          f->view.posts = f->posts.data();
        }
        f->view.slotBytes = slotBytes;
        f->view.nslots = nslots;
        // Low-latency slots, zeroed as the GPU's are at setup (used only where a run's threshold lets).
        f->lowLatency.assign(nslots * loom::cuda::kLowLatencySlotBytes / sizeof(uint64_t), 0);
        f->view.lowLatencySlots = reinterpret_cast<char*>(f->lowLatency.data());
        fifos_[(static_cast<size_t>(from) * nranks + to) * nchannels + c] = std::move(f);
      }
}

const HostFifoMesh::Fifo* HostFifoMesh::fifo(int from, int to, uint32_t channel) const {
  return fifos_[(static_cast<size_t>(from) * nranks_ + to) * nchannels_ + channel].get();
}

void HostFifoMesh::setScope(loom::cuda::FifoScope scope) {
  scope_ = scope;
  for (auto& f : fifos_)
    if (f) f->view.scope = scope;
}

DeviceFifo HostFifoMesh::view(int from, int to, uint32_t channel) const {
  const Fifo* f = fifo(from, to, channel);
  return f ? f->view : DeviceFifo{};
}

std::vector<DeviceFifo> HostFifoMesh::sends(int rank) const {
  std::vector<DeviceFifo> table(static_cast<size_t>(nranks_) * nchannels_);
  for (int peer = 0; peer < nranks_; ++peer)
    for (uint32_t c = 0; c < nchannels_; ++c)
      if (const Fifo* f = fifo(rank, peer, c)) table[static_cast<size_t>(peer) * nchannels_ + c] = f->view;
  return table;
}

std::vector<DeviceFifo> HostFifoMesh::recvs(int rank) const {
  std::vector<DeviceFifo> table(static_cast<size_t>(nranks_) * nchannels_);
  for (int peer = 0; peer < nranks_; ++peer)
    for (uint32_t c = 0; c < nchannels_; ++c)
      if (const Fifo* f = fifo(peer, rank, c)) table[static_cast<size_t>(peer) * nchannels_ + c] = f->view;
  return table;
}

namespace {

// A plan's bindings over the mesh and the lane statuses they point into; it stays where it was made.
struct BoundPlan {
  BoundPlan(const RankRun& run, const HostFifoMesh& mesh, loomDataType_t dtype, const loom::ReduceOp& op,
            const EmulationOptions& options)
      : plan(*run.plan),
        sends(mesh.sends(plan.rank)),
        recvs(mesh.recvs(plan.rank)),
        direct(run.buffers.size(), 1),  // host memory in one process: every buffer is writable by the peers
        status(plan.lanes.size()) {
    bindings.dtype = dtype;
    bindings.op = op;
    bindings.buffers = run.buffers;
    bindings.nchannels = mesh.nchannels();
    bindings.sends = sends;
    bindings.recvs = recvs;
    bindings.directBuffers = direct;
    bindings.abort = options.abort;
    bindings.laneStatus = status.data();
    bindings.timeoutNs = options.timeoutNs;
    bindings.lowLatencyBytes = options.lowLatencyBytes;
    bindings.profile = options.profile;
    bindings.boards = mesh.boards();
    bindings.boardChannels = mesh.nchannels();
    bindings.boardScope = mesh.scope();
    bindings.windows = options.windows;
  }
  BoundPlan(const BoundPlan&) = delete;
  BoundPlan& operator=(const BoundPlan&) = delete;

  size_t bytes() const { return loom::device::devicePlanBytes(plan, bindings); }
  // Encodes the plan and binds its call (host memory: the buffer table, when one is needed, is the
  // bindings' own).
  loom::Status encode(std::span<std::byte> out, loom::cuda::DevicePlanShape* shape) {
    LOOM_TRY(loom::device::encodeDevicePlan(plan, bindings, out, shape));
    return loom::device::bindDevicePlanCall(plan, bindings, bindings.buffers.data(), &call);
  }
  loom::Status result() const { return loom::device::devicePlanResult(plan, status); }

  const loom::Plan& plan;
  std::vector<DeviceFifo> sends, recvs;
  std::vector<uint8_t> direct;
  std::vector<DeviceLaneStatus> status;
  loom::device::DevicePlanBindings bindings;
  loom::cuda::DevicePlanCall call;
};

// Encoded bytes, aligned as a GPU allocation would be at least (DevicePlanSequence is 128-aligned).
class EncodedBytes {
 public:
  explicit EncodedBytes(size_t bytes) : lines_((bytes + sizeof(Line) - 1) / sizeof(Line)) {}
  std::span<std::byte> bytes() { return std::as_writable_bytes(std::span(lines_)); }
  const void* data() const { return lines_.data(); }

 private:
  struct alignas(128) Line {
    std::byte bytes[128];
  };
  std::vector<Line> lines_;
};

// Runs `blocks` blocks of workersPerLane threads each, every thread calling run(block, lane, worker),
// and returns once all have.
class HostLaunches {
 public:
  HostLaunches(uint32_t workersPerLane, loom::cuda::HostLaneCounts* counts) : workers_(workersPerLane), counts_(counts) {}
  ~HostLaunches() {
    for (std::thread& t : threads_) t.join();
  }
  template <class Run>
  void launch(uint32_t blocks, Run run) {
    for (uint32_t b = 0; b < blocks; ++b) {
      lanes_.push_back(std::make_unique<loom::cuda::HostLane>(workers_, counts_));
      loom::cuda::HostLane* lane = lanes_.back().get();
      for (uint32_t w = 0; w < workers_; ++w) threads_.emplace_back([=] { run(b, lane, w); });
    }
  }

 private:
  uint32_t workers_;
  loom::cuda::HostLaneCounts* counts_;
  std::vector<std::unique_ptr<loom::cuda::HostLane>> lanes_;
  std::vector<std::thread> threads_;
};

}  // namespace

std::vector<loom::Status> runEmulated(const std::vector<RankRun>& ranks, const HostFifoMesh& mesh, loomDataType_t dtype,
                                      const loom::ReduceOp& op, const EmulationOptions& options) {
  std::vector<std::unique_ptr<BoundPlan>> bound;
  std::vector<EncodedBytes> encoded;
  std::vector<loom::cuda::DevicePlanShape> shapes(ranks.size());
  std::vector<loom::Status> results(ranks.size());
  bool encodedAll = true;
  for (size_t r = 0; r < ranks.size(); ++r) {
    bound.push_back(std::make_unique<BoundPlan>(ranks[r], mesh, dtype, op, options));
    encoded.emplace_back(bound[r]->bytes());
    results[r] = bound[r]->encode(encoded[r].bytes(), &shapes[r]);
    encodedAll = encodedAll && results[r].ok();
  }
  if (!encodedAll) return results;
  {
    HostLaunches launches(options.workersPerLane, options.counts);
    for (size_t r = 0; r < ranks.size(); ++r) {
      const uint32_t delayMs = r < options.startDelayMs.size() ? options.startDelayMs[r] : 0;
      launches.launch(shapes[r].lanes, [plan = encoded[r].data(), call = &bound[r]->call, delayMs](
                                           uint32_t l, loom::cuda::HostLane* lane, uint32_t w) {
        if (delayMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
        loom::cuda::runLaneOnHost(plan, *call, l, lane, w);
      });
    }
  }
  for (size_t r = 0; r < ranks.size(); ++r) results[r] = bound[r]->result();
  if (options.laneStatuses) {
    options.laneStatuses->clear();
    for (const auto& b : bound) options.laneStatuses->push_back(b->status);
  }
  return results;
}

std::vector<std::vector<SequencedResult>> runSequenceEmulated(const std::vector<std::vector<SequencedRun>>& ranks,
                                                              const HostFifoMesh& mesh, loomDataType_t dtype,
                                                              const EmulationOptions& options) {
  std::vector<std::vector<std::unique_ptr<BoundPlan>>> bound(ranks.size());
  std::vector<EncodedBytes> sequences;
  std::vector<std::vector<loom::cuda::DevicePlanCall>> calls(ranks.size());  // each rank's call table
  std::vector<loom::cuda::DeviceLaunchArgs> args(ranks.size());
  std::vector<uint32_t> blocks(ranks.size(), 0);
  std::vector<std::vector<SequencedResult>> results(ranks.size());
  bool encodedAll = true;
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::vector<size_t> planBytes;
    for (const SequencedRun& s : ranks[r]) {
      bound[r].push_back(std::make_unique<BoundPlan>(s.run, mesh, dtype, s.op, options));
      planBytes.push_back(bound[r].back()->bytes());
      blocks[r] = std::max(blocks[r], static_cast<uint32_t>(s.run.plan->lanes.size()));
    }
    const loom::device::DevicePlanSequenceLayout layout = loom::device::layoutDevicePlanSequence(planBytes);
    sequences.emplace_back(layout.total);
    const std::span<std::byte> out = sequences[r].bytes();
    loom::device::writeDevicePlanSequenceHeader(layout, blocks[r], out);
    for (size_t k = 0; k < bound[r].size(); ++k) {
      loom::cuda::DevicePlanShape shape;
      results[r].push_back({bound[r][k]->encode(out.subspan(layout.offsets[k], planBytes[k]), &shape), {}});
      encodedAll = encodedAll && results[r].back().status.ok();
      calls[r].push_back(bound[r][k]->call);
    }
    // The calls as a launch passes them: inline up to kInlinePlans, else as a table.
    args[r].sequence = sequences[r].data();
    if (calls[r].size() > loom::cuda::kInlinePlans)
      args[r].callTable = calls[r].data();
    else
      std::copy(calls[r].begin(), calls[r].end(), args[r].calls);
  }
  if (!encodedAll) return results;
  {
    HostLaunches launches(options.workersPerLane, options.counts);  // every block of every rank at once, as plan_launch.h requires
    for (size_t r = 0; r < ranks.size(); ++r)
      launches.launch(blocks[r], [a = &args[r]](uint32_t b, loom::cuda::HostLane* lane, uint32_t w) {
        loom::cuda::runSequenceOnHost(*a, b, lane, w);
      });
  }
  for (size_t r = 0; r < ranks.size(); ++r)
    for (size_t k = 0; k < bound[r].size(); ++k) results[r][k] = {bound[r][k]->result(), bound[r][k]->status};
  return results;
}

loom::Status runReference(const std::vector<RankRun>& ranks, loomDataType_t dtype, const loom::ReduceOp& op) {
  using loom::StepKind;
  const size_t es = loom::dataTypeSize(dtype);
  std::map<std::tuple<int, int, uint32_t>, std::deque<std::vector<char>>> queues;  // (from, to, channel)
  std::vector<std::vector<size_t>> next(ranks.size());
  // Peer-memory plans: the Meets each lane reached; a lane passes its k-th once every rank's lane of
  // its channel reached k.
  std::vector<std::vector<uint32_t>> meets(ranks.size());
  std::vector<std::vector<bool>> waiting(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    next[r].assign(ranks[r].plan->lanes.size(), 0);
    meets[r].assign(ranks[r].plan->lanes.size(), 0);
    waiting[r].assign(ranks[r].plan->lanes.size(), false);
  }
  const int n = static_cast<int>(ranks.size());
  auto everyRankMet = [&](uint32_t channel, uint32_t k) {
    for (size_t q = 0; q < ranks.size(); ++q) {
      bool found = false;
      for (size_t l = 0; l < ranks[q].plan->lanes.size(); ++l)
        if (ranks[q].plan->lanes[l].channel == channel) found = meets[q][l] >= k;
      if (!found) return false;
    }
    return true;
  };
  for (;;) {
    bool progressed = false, done = true;
    for (size_t r = 0; r < ranks.size(); ++r) {
      const loom::Plan& plan = *ranks[r].plan;
      auto on = [&](int rank, const loom::BufRef& ref) { return ranks[rank].buffers[ref.buffer] + ref.offset * es; };
      auto at = [&](const loom::BufRef& ref) { return on(ref.own() ? plan.rank : ref.rank, ref); };
      // The ranks a ref names (own, one, or every rank in rank order).
      auto ranksOf = [&](const loom::BufRef& ref) {
        std::vector<int> out;
        if (ref.rank == loom::kEveryRank)
          for (int q = 0; q < n; ++q) out.push_back(q);
        else
          out.push_back(ref.own() ? plan.rank : ref.rank);
        return out;
      };
      for (size_t l = 0; l < plan.lanes.size(); ++l) {
        const loom::Lane& lane = plan.lanes[l];
        for (; next[r][l] < lane.steps.size(); ++next[r][l], progressed = true) {
          const loom::Step& s = lane.steps[next[r][l]];
          const size_t bytes = s.count * es;
          if (s.kind == StepKind::Meet) {
            if (!waiting[r][l]) {  // reached now; it stays reached while it waits
              ++meets[r][l];
              waiting[r][l] = true;
              progressed = true;
            }
            if (!everyRankMet(lane.channel, meets[r][l])) break;
            waiting[r][l] = false;
            continue;
          }
          if (s.kind == StepKind::ReduceRanks || !s.src.own() || !s.dst.own()) {
            // One-shot's order: rank 0's source, then each next rank's reduced in (finalizing with the last).
            const std::vector<int> from = ranksOf(s.src);
            std::vector<char> acc(on(from[0], s.src), on(from[0], s.src) + bytes);
            if (from.size() == 1 && s.finalize)
              loom::copyArray(acc.data(), on(from[0], s.src), s.count, dtype, op, true);
            for (size_t j = 1; j < from.size(); ++j)
              loom::reduceArrays(acc.data(), acc.data(), on(from[j], s.src), s.count, dtype, op,
                                 s.finalize && j + 1 == from.size());
            for (int q : ranksOf(s.dst)) std::memcpy(on(q, s.dst), acc.data(), bytes);
            continue;
          }
          std::deque<std::vector<char>>* in = nullptr;
          if (s.recvPeer >= 0) {
            in = &queues[{s.recvPeer, plan.rank, lane.channel}];
            if (in->empty()) break;
            if (in->front().size() != bytes)
              return loom::internalError("reference: rank {} lane {} step {} expects {} bytes, {} arrived", plan.rank,
                                         l, next[r][l], bytes, in->front().size());
          }
          std::deque<std::vector<char>>* out =
              s.sendPeer >= 0 ? &queues[{plan.rank, s.sendPeer, lane.channel}] : nullptr;
          switch (s.kind) {
            case StepKind::Send: out->emplace_back(at(s.src), at(s.src) + bytes); break;
            case StepKind::Recv: std::memcpy(at(s.dst), in->front().data(), bytes); break;
            case StepKind::RecvReduce:
              loom::reduceArrays(at(s.dst), in->front().data(), at(s.src), s.count, dtype, op, s.finalize);
              break;
            case StepKind::RecvReduceSend: {
              std::vector<char> msg(bytes);
              loom::reduceArrays(msg.data(), in->front().data(), at(s.src), s.count, dtype, op, s.finalize);
              if (s.dst.valid()) std::memcpy(at(s.dst), msg.data(), bytes);
              out->push_back(std::move(msg));
              break;
            }
            case StepKind::RecvCopySend:
              if (s.dst.valid()) std::memcpy(at(s.dst), in->front().data(), bytes);
              out->push_back(in->front());
              break;
            case StepKind::Reduce:
              loom::reduceArrays(at(s.dst), at(s.dst), at(s.src), s.count, dtype, op, s.finalize);
              break;
            case StepKind::Copy:
              if (s.finalize)
                loom::copyArray(at(s.dst), at(s.src), s.count, dtype, op, true);
              else if (at(s.dst) != at(s.src))
                std::memmove(at(s.dst), at(s.src), bytes);
              break;
            case StepKind::Meet:
            case StepKind::ReduceRanks: break;  // above
          }
          if (in) in->pop_front();
        }
        done = done && next[r][l] == lane.steps.size();
      }
    }
    if (done) return loom::Status::Ok();
    if (!progressed) return loom::internalError("reference: the plans deadlock");
  }
}

}  // namespace loomgpu
