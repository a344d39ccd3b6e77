#include "plan_emulation.h"

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

HostFifoMesh::HostFifoMesh(int nranks, uint32_t nchannels, uint32_t nslots, size_t slotBytes)
    : nranks_(nranks), nchannels_(nchannels) {
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
        f->view.slotBytes = slotBytes;
        f->view.nslots = nslots;
        fifos_[(static_cast<size_t>(from) * nranks + to) * nchannels + c] = std::move(f);
      }
}

const HostFifoMesh::Fifo* HostFifoMesh::fifo(int from, int to, uint32_t channel) const {
  return fifos_[(static_cast<size_t>(from) * nranks_ + to) * nchannels_ + channel].get();
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

std::vector<loom::Status> runEmulated(const std::vector<RankRun>& ranks, const HostFifoMesh& mesh, loomDataType_t dtype,
                                      const loom::ReduceOp& op, const EmulationOptions& options) {
  struct Encoded {
    std::vector<std::max_align_t> bytes;
    std::vector<DeviceLaneStatus> status;
    loom::cuda::DevicePlanShape shape;
  };
  std::vector<Encoded> encoded(ranks.size());
  std::vector<loom::Status> results(ranks.size());
  bool encodedAll = true;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const loom::Plan& plan = *ranks[r].plan;
    const std::vector<DeviceFifo> sends = mesh.sends(plan.rank), recvs = mesh.recvs(plan.rank);
    Encoded& e = encoded[r];
    e.status.assign(plan.lanes.size(), DeviceLaneStatus{});
    loom::cuda::DevicePlanBindings b;
    b.dtype = dtype;
    b.op = op;
    b.buffers = ranks[r].buffers;
    b.nchannels = mesh.nchannels();
    b.sends = sends;
    b.recvs = recvs;
    b.abort = options.abort;
    b.laneStatus = e.status.data();
    b.timeoutNs = options.timeoutNs;
    const size_t bytes = loom::cuda::devicePlanBytes(plan, b);
    e.bytes.resize((bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
    results[r] = loom::cuda::encodeDevicePlan(plan, b, std::as_writable_bytes(std::span(e.bytes)), &e.shape);
    encodedAll = encodedAll && results[r].ok();
  }
  if (!encodedAll) return results;

  std::vector<std::unique_ptr<loom::cuda::HostLane>> lanes;
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r)
    for (uint32_t l = 0; l < encoded[r].shape.lanes; ++l) {
      lanes.push_back(std::make_unique<loom::cuda::HostLane>(options.workersPerLane));
      loom::cuda::HostLane* lane = lanes.back().get();
      const void* plan = encoded[r].bytes.data();
      for (uint32_t w = 0; w < options.workersPerLane; ++w)
        threads.emplace_back([=] { loom::cuda::runLaneOnHost(plan, l, lane, w); });
    }
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < ranks.size(); ++r)
    results[r] = loom::cuda::devicePlanResult(*ranks[r].plan, encoded[r].status);
  return results;
}

loom::Status runReference(const std::vector<RankRun>& ranks, loomDataType_t dtype, const loom::ReduceOp& op) {
  using loom::StepKind;
  const size_t es = loom::dataTypeSize(dtype);
  std::map<std::tuple<int, int, uint32_t>, std::deque<std::vector<char>>> queues;  // (from, to, channel)
  std::vector<std::vector<size_t>> next(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) next[r].assign(ranks[r].plan->lanes.size(), 0);
  for (;;) {
    bool progressed = false, done = true;
    for (size_t r = 0; r < ranks.size(); ++r) {
      const loom::Plan& plan = *ranks[r].plan;
      auto at = [&](const loom::BufRef& ref) { return ranks[r].buffers[ref.buffer] + ref.offset * es; };
      for (size_t l = 0; l < plan.lanes.size(); ++l) {
        const loom::Lane& lane = plan.lanes[l];
        for (; next[r][l] < lane.steps.size(); ++next[r][l], progressed = true) {
          const loom::Step& s = lane.steps[next[r][l]];
          const size_t bytes = s.count * es;
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
