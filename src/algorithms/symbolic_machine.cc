#include "algorithms/symbolic_machine.h"

#include <bit>
#include <algorithm>
#include <map>

#include "algorithms/builders.h"

namespace loom::verify {

std::string describe(const Value& value) {
  if (!value.defined()) return "nothing";
  std::string ranks;
  for (uint64_t bits = value.ranks; bits != 0; bits &= bits - 1) {
    if (!ranks.empty()) ranks += ",";
    ranks += std::to_string(std::countr_zero(bits));
  }
  const std::string buffer = value.origin == kSendBuffer ? "send" : fmt::format("buffer {}", value.origin);
  return fmt::format("{}[{}] of rank(s) {{{}}}{}", buffer, value.index, ranks, value.final() ? " finalized" : "");
}

namespace {

constexpr int kSlots = 2;  // the fewest FIFO slots an executor may give a connection

struct Message {
  std::vector<Value> data;
  int rank = 0;
  int lane = 0;
  size_t step = 0;
};

// One direction of one (rank pair, channel) connection, with the only lane on each end that uses it.
struct Queue {
  Message slots[kSlots];
  int head = 0;
  int size = 0;
  int senderLane = -1;    // global lane id
  int receiverLane = -1;  // global lane id
  int src = 0, dst = 0;
  uint32_t channel = 0;

  Message& front() { return slots[head]; }
  Message& back() { return slots[(head + size) % kSlots]; }
};

struct LaneState {
  int rank = 0;
  int lane = 0;
  size_t next = 0;
  bool queued = false;
  std::vector<int32_t> inQueue, outQueue;  // per step, -1 when the step does not use that direction
  uint32_t channel = 0;
  uint32_t epoch = 0;      // Meets passed (peer-memory plans)
  uint32_t meets = 0;      // Meets the lane has in all
  bool arrived = false;    // counted at the Meet it waits in
};

// Peer-memory plans: one access to a cell, by lane `lane` (global id) between its Meets `epoch` and
// epoch + 1. Two accesses are ordered when one lane made both, or when lanes of one channel made them
// in different epochs (every rank's lane of the channel passed the Meets in between).
struct Access {
  int32_t lane = -1;
  uint32_t epoch = 0;
};
struct CellAccesses {
  Access write;
  std::vector<Access> reads;  // since the last write, the latest of each lane
};

bool needsIncoming(StepKind k) {
  return k == StepKind::Recv || k == StepKind::RecvReduce || k == StepKind::RecvReduceSend ||
         k == StepKind::RecvCopySend;
}
bool needsOutgoing(StepKind k) {
  return k == StepKind::Send || k == StepKind::RecvReduceSend || k == StepKind::RecvCopySend;
}
bool reduces(StepKind k) {
  return k == StepKind::RecvReduce || k == StepKind::RecvReduceSend || k == StepKind::Reduce ||
         k == StepKind::ReduceRanks;
}
bool namesPeerMemory(const Step& step) {
  return step.kind == StepKind::Meet || step.kind == StepKind::ReduceRanks || !step.src.own() || !step.dst.own();
}

class Machine {
 public:
  Machine(const MachineConfig& config, const std::vector<Plan>& plans, std::vector<RankMemory>* memory)
      : config_(config), plans_(plans), memory_(*memory) {
    full_ = config.nranks >= 64 ? ~uint64_t{0} : (uint64_t{1} << config.nranks) - 1;
  }

  Status run() {
    LOOM_TRY(checkStatic());
    writer_.resize(plans_.size());
    reader_.resize(plans_.size());
    for (size_t r = 0; r < plans_.size(); ++r) {
      writer_[r].assign(memory_[r].cells.size(), -1);
      reader_[r].assign(memory_[r].cells.size(), -1);
    }
    if (peerMemory_) {
      accesses_.resize(plans_.size());
      for (size_t r = 0; r < plans_.size(); ++r) accesses_[r].assign(memory_[r].cells.size(), CellAccesses{});
    }
    for (int id = static_cast<int>(lanes_.size()) - 1; id >= 0; --id) {
      ready_.push_back(id);
      lanes_[id].queued = true;
    }
    while (!ready_.empty()) {
      const int id = ready_.back();
      ready_.pop_back();
      lanes_[id].queued = false;
      LOOM_TRY(runLane(id));
    }
    LOOM_TRY(checkFinished());
    return Status::Ok();
  }

 private:
  const Step& stepOf(const LaneState& ls) const { return plans_[ls.rank].lanes[ls.lane].steps[ls.next]; }
  size_t stepCount(const LaneState& ls) const { return plans_[ls.rank].lanes[ls.lane].steps.size(); }

  template <typename... Args>
  Status fail(const LaneState& ls, fmt::format_string<Args...> format, Args&&... args) const {
    const Step& step = stepOf(ls);
    return internalError("{} {}: rank {} lane {} step {} ({}): {}", collectiveName(config_.coll), config_.layout,
                         ls.rank, ls.lane, ls.next, stepKindName(step.kind),
                         fmt::format(format, std::forward<Args>(args)...));
  }

  // Plan-level rules that do not depend on execution; also wires every step to its queues.
  Status checkStatic() {
    const int n = config_.nranks;
    if (static_cast<int>(plans_.size()) != n || static_cast<int>(memory_.size()) != n)
      return invalidArgument("verifier: {} plan(s) and {} memories for {} ranks", plans_.size(), memory_.size(), n);
    uint32_t channels = 1;
    for (const Plan& plan : plans_) channels = std::max(channels, plan.nchannels);
    if (channels > 4096) return invalidArgument("verifier: {} channels; at most 4096 are tracked", channels);
    channels_ = channels;
    queueOf_.assign(static_cast<size_t>(n) * n * channels, -1);  // (src, dst, channel) -> queue
    for (int r = 0; r < n; ++r) {
      const Plan& plan = plans_[r];
      const std::string where = fmt::format("{} {}: rank {}", collectiveName(config_.coll), config_.layout, r);
      if (plan.nranks != n || plan.rank != r || plan.coll != config_.coll)
        return internalError("{}: plan is for {} rank {} of {}", where, collectiveName(plan.coll), plan.rank,
                             plan.nranks);
      if (config_.maxChannels > 0 && plan.nchannels > config_.maxChannels)
        return internalError("{}: plan uses {} channels but the request allows {}", where, plan.nchannels,
                             config_.maxChannels);
      uint64_t largest = 0;
      for (size_t l = 0; l < plan.lanes.size(); ++l) {
        const Lane& lane = plan.lanes[l];
        const int id = static_cast<int>(lanes_.size());
        lanes_.push_back(LaneState{r, static_cast<int>(l), 0, false, {}, {}});
        LaneState& ls = lanes_.back();
        ls.channel = lane.channel;
        ls.inQueue.reserve(lane.steps.size());
        ls.outQueue.reserve(lane.steps.size());
        if (lane.channel >= plan.nchannels)
          return internalError("{} lane {}: channel {} but plan.nchannels is {}", where, l, lane.channel,
                               plan.nchannels);
        for (size_t s = 0; s < lane.steps.size(); ++s) {
          ls.next = s;
          const Step& step = lane.steps[s];
          if (namesPeerMemory(step)) {
            peerMemory_ = true;
            LOOM_TRY(checkPeerStep(ls, step));
            if (step.kind == StepKind::Meet) {
              ++ls.meets;
              ls.inQueue.push_back(-1);
              ls.outQueue.push_back(-1);
              continue;
            }
          }
          if (step.count == 0) return fail(ls, "empty step");
          if (reduces(step.kind) && !config_.reduction) return fail(ls, "reduces in a collective without reduction");
          if (step.finalize && (!config_.reduction || !(reduces(step.kind) || step.kind == StepKind::Copy)))
            return fail(ls, "finalize on a step that does not produce a reduction's value");
          // The executor opens a connection for every peer a step names, so unused peers must be -1.
          if (!needsIncoming(step.kind) && step.recvPeer != -1)
            return fail(ls, "names recvPeer {} but does not receive", step.recvPeer);
          if (!needsOutgoing(step.kind) && step.sendPeer != -1)
            return fail(ls, "names sendPeer {} but does not send", step.sendPeer);
          int32_t in = -1, out = -1;
          if (needsIncoming(step.kind)) {
            LOOM_TRY(connect(ls, id, step.recvPeer, r, lane.channel, "receives from", &in));
            largest = std::max(largest, step.count);
          }
          if (needsOutgoing(step.kind)) {
            LOOM_TRY(connect(ls, id, r, step.sendPeer, lane.channel, "sends to", &out));
            largest = std::max(largest, step.count);
          }
          if (step.count > config_.messageLimit && (in >= 0 || out >= 0))
            return fail(ls, "message of {} elements exceeds chunkElems {}", step.count, config_.messageLimit);
          ls.inQueue.push_back(in);
          ls.outQueue.push_back(out);
        }
        ls.next = 0;
      }
      if (peerMemory_) {
        for (size_t a = 0; a < plan.lanes.size(); ++a)
          for (size_t b = a + 1; b < plan.lanes.size(); ++b)
            if (plan.lanes[a].channel == plan.lanes[b].channel)
              return internalError("{}: lanes {} and {} of a peer-memory plan share channel {} (a Meet is every "
                                   "rank's lane of a channel)",
                                   where, a, b, plan.lanes[a].channel);
      }
      if (largest != plan.maxMessageElems)
        return internalError("{}: maxMessageElems is {} but the largest message has {} elements", where,
                             plan.maxMessageElems, largest);
    }
    if (peerMemory_ && !queues_.empty())
      return internalError("{} {}: plans that touch peers' memory exchange messages too; peer-memory plans have "
                           "none (only Meets order them)",
                           collectiveName(config_.coll), config_.layout);
    return Status::Ok();
  }

  // The static rules of a step of a peer-memory plan.
  Status checkPeerStep(const LaneState& ls, const Step& step) const {
    const int n = config_.nranks;
    auto rankOk = [&](const BufRef& ref, bool every) {
      return !ref.valid() || ref.rank == kOwnRank || (every && ref.rank == kEveryRank) || (ref.rank >= 0 && ref.rank < n);
    };
    if (step.sendPeer != -1 || step.recvPeer != -1) return fail(ls, "a peer-memory step names a message's peer");
    switch (step.kind) {
      case StepKind::Meet:
        if (step.src.valid() || step.dst.valid() || step.count != 0 || step.finalize)
          return fail(ls, "a Meet moves no data (no src, dst, count or finalize)");
        return Status::Ok();
      case StepKind::ReduceRanks:
        if (step.src.rank != kEveryRank) return fail(ls, "ReduceRanks reads every rank's source (src.rank kEveryRank)");
        break;
      case StepKind::Copy:
      case StepKind::Reduce:
        if (!step.src.own() && !rankOk(step.src, false)) return fail(ls, "source names rank {}", step.src.rank);
        if (step.kind == StepKind::Reduce && !step.dst.own())
          return fail(ls, "a Reduce's destination is its own rank's (dst = dst op src)");
        break;
      default: return fail(ls, "{} names a peer's memory; only Copy, Reduce and ReduceRanks may", stepKindName(step.kind));
    }
    if (!rankOk(step.dst, true)) return fail(ls, "destination names rank {}", step.dst.rank);
    return Status::Ok();
  }

  // Finds or makes the queue src->dst on channel and records lane id as its only user on this side.
  Status connect(const LaneState& ls, int id, int src, int dst, uint32_t channel, const char* verb, int32_t* queue) {
    const int n = config_.nranks;
    const int peer = src == ls.rank ? dst : src;
    if (peer < 0 || peer >= n) return fail(ls, "{} rank {}, out of range [0, {})", verb, peer, n);
    if (peer == ls.rank) return fail(ls, "{} itself (use Copy)", verb);
    int32_t& index = queueOf_[(static_cast<size_t>(src) * n + dst) * channels_ + channel];
    if (index < 0) {
      index = static_cast<int32_t>(queues_.size());
      queues_.emplace_back();
      queues_.back().src = src;
      queues_.back().dst = dst;
      queues_.back().channel = channel;
    }
    Queue& q = queues_[index];
    int& owner = src == ls.rank ? q.senderLane : q.receiverLane;
    if (owner >= 0 && owner != id)
      return fail(ls, "{} rank {} on channel {}, a connection lane {} also uses", verb, peer, channel,
                  lanes_[owner].lane);
    owner = id;
    *queue = index;
    return Status::Ok();
  }

  void wake(int id) {
    if (id < 0 || lanes_[id].queued || lanes_[id].next >= stepCount(lanes_[id])) return;
    lanes_[id].queued = true;
    ready_.push_back(id);
  }

  Status runLane(int id) {
    LaneState& ls = lanes_[id];
    while (ls.next < stepCount(ls)) {
      if (peerMemory_) {
        const Step& step = stepOf(ls);
        if (step.kind == StepKind::Meet) {
          int& arrived = meetArrivals_[{ls.channel, ls.epoch}];
          if (!ls.arrived) {
            ls.arrived = true;
            if (++arrived == config_.nranks) {
              for (size_t other = 0; other < lanes_.size(); ++other)
                if (lanes_[other].channel == ls.channel && lanes_[other].arrived) wake(static_cast<int>(other));
            }
          }
          if (arrived < config_.nranks) return Status::Ok();
          ls.arrived = false;
          ++ls.epoch;
          ++ls.next;
          continue;
        }
        LOOM_TRY(executePeer(id, ls));
        ++ls.next;
        continue;
      }
      const int32_t in = ls.inQueue[ls.next];
      const int32_t out = ls.outQueue[ls.next];
      if (in >= 0 && queues_[in].size == 0) return Status::Ok();
      if (out >= 0 && queues_[out].size == kSlots) return Status::Ok();
      LOOM_TRY(execute(ls, in >= 0 ? &queues_[in] : nullptr, out >= 0 ? &queues_[out] : nullptr));
      if (in >= 0) wake(queues_[in].senderLane);
      if (out >= 0) wake(queues_[out].receiverLane);
      ++ls.next;
    }
    return Status::Ok();
  }

  // Resolves ref for the step's count elements to a cell index in the rank's memory.
  Status resolve(const LaneState& ls, const BufRef& ref, bool write, const char* role, uint64_t* cell) {
    const Step& step = stepOf(ls);
    const RankMemory& mem = memory_[ls.rank];
    if (!ref.valid()) return fail(ls, "has no {} buffer", role);
    if (ref.buffer >= mem.buffers.size() || !mem.buffers[ref.buffer].present)
      return fail(ls, "{} names buffer {}, which this rank does not have", role, ref.buffer);
    const BufferSpec& spec = mem.buffers[ref.buffer];
    if (ref.offset > spec.size || step.count > spec.size - ref.offset)
      return fail(ls, "{} {}[{}..{}) lies outside the buffer, which has {} element(s) on this rank", role, spec.name,
                  ref.offset, ref.offset + step.count, spec.size);
    if (write && !spec.writable)
      return fail(ls, "writes {}[{}..{}), which is read-only input", spec.name, ref.offset, ref.offset + step.count);
    *cell = spec.base + ref.offset;
    return Status::Ok();
  }

  std::string cellName(const LaneState& ls, const BufRef& ref, uint64_t i) const {
    return fmt::format("{}[{}]", memory_[ls.rank].buffers[ref.buffer].name, ref.offset + i);
  }

  Status read(const LaneState& ls, const BufRef& ref, uint64_t cell, uint64_t i, Value* value) {
    const int32_t w = writer_[ls.rank][cell + i];
    if (w >= 0 && w != ls.lane)
      return fail(ls, "reads {}, which lane {} writes; lanes of a rank are unordered", cellName(ls, ref, i), w);
    int32_t& rd = reader_[ls.rank][cell + i];
    if (rd == -1) rd = ls.lane;
    else if (rd != ls.lane) rd = -2;
    *value = memory_[ls.rank].cells[cell + i];
    if (!value->defined()) return fail(ls, "reads {} before anything was written to it", cellName(ls, ref, i));
    return Status::Ok();
  }

  Status write(const LaneState& ls, const BufRef& ref, uint64_t cell, uint64_t i, const Value& value) {
    int32_t& w = writer_[ls.rank][cell + i];
    const int32_t rd = reader_[ls.rank][cell + i];
    if ((w >= 0 && w != ls.lane) || (rd != -1 && rd != ls.lane))
      return fail(ls, "writes {}, which another lane ({}) also {}; lanes of a rank are unordered", cellName(ls, ref, i),
                  w >= 0 && w != ls.lane ? w : rd, w >= 0 && w != ls.lane ? "writes" : "reads");
    w = ls.lane;
    memory_[ls.rank].cells[cell + i] = value;
    return Status::Ok();
  }

  // Names element i of the step's result for error messages.
  std::string elementName(const LaneState& ls, uint64_t i) const {
    const Step& step = stepOf(ls);
    if (step.dst.valid() && step.dst.buffer < memory_[ls.rank].buffers.size()) return cellName(ls, step.dst, i);
    return fmt::format("outgoing element {}", i);
  }

  // incoming (op) local, with the rules of a reduction over distinct ranks' copies of one element.
  Status combine(const LaneState& ls, const Value& incoming, const Value& local, uint64_t i, Value* out) {
    if (incoming.final() || local.final())
      return fail(ls, "{} reduces an already finalized value ({} with {})", elementName(ls, i), describe(incoming),
                  describe(local));
    if (incoming.origin != local.origin || incoming.index != local.index)
      return fail(ls, "{} reduces different elements ({} with {})", elementName(ls, i), describe(incoming), describe(local));
    if ((incoming.ranks & local.ranks) != 0)
      return fail(ls, "{} counts a contribution twice ({} with {})", elementName(ls, i), describe(incoming), describe(local));
    const uint64_t ranks = incoming.ranks | local.ranks;  // out may be local
    *out = incoming;
    out->ranks = ranks;
    return Status::Ok();
  }

  Status finalize(const LaneState& ls, uint64_t i, Value* value) {
    if (value->final()) return fail(ls, "{} finalized twice ({})", elementName(ls, i), describe(*value));
    if (value->ranks != full_)
      return fail(ls, "{} finalized with {} of {} contributions ({})", elementName(ls, i), std::popcount(value->ranks),
                  config_.nranks, describe(*value));
    value->flags |= Value::kFinal;
    return Status::Ok();
  }

  Status checkOverlap(const LaneState& ls, uint64_t src, uint64_t dst, uint64_t count) {
    if (src != dst && src < dst + count && dst < src + count)
      return fail(ls, "source and destination overlap without being the same elements");
    return Status::Ok();
  }

  Status execute(LaneState& ls, Queue* in, Queue* out) {
    const Step& step = stepOf(ls);
    const uint64_t count = step.count;
    Message* incoming = nullptr;
    if (in != nullptr) {
      incoming = &in->front();
      if (incoming->data.size() != count)
        return fail(ls, "receives {} element(s) from rank {} but rank {} lane {} step {} sent {}", count, in->src,
                    incoming->rank, incoming->lane, incoming->step, incoming->data.size());
    }
    Message* outgoing = nullptr;
    if (out != nullptr) {
      outgoing = &out->back();
      outgoing->data.resize(count);
      outgoing->rank = ls.rank;
      outgoing->lane = ls.lane;
      outgoing->step = ls.next;
    }
    uint64_t src = 0, dst = 0;
    const bool hasSrc = step.kind == StepKind::Send || step.kind == StepKind::Copy || reduces(step.kind);
    const bool hasDst = step.kind == StepKind::Recv || step.kind == StepKind::RecvReduce ||
                        step.kind == StepKind::Copy || step.kind == StepKind::Reduce ||
                        ((step.kind == StepKind::RecvReduceSend || step.kind == StepKind::RecvCopySend) &&
                         step.dst.valid());
    if (hasSrc) LOOM_TRY(resolve(ls, step.src, false, "source", &src));
    if (hasDst) LOOM_TRY(resolve(ls, step.dst, true, "destination", &dst));
    if (hasSrc && hasDst) LOOM_TRY(checkOverlap(ls, src, dst, count));
    if (step.kind == StepKind::Reduce && src == dst) return fail(ls, "reduces elements with themselves");
    if (step.kind == StepKind::Copy && src == dst && !step.finalize) {
      // A copy onto itself (in place) changes nothing; the executor skips it.
    } else {
      for (uint64_t i = 0; i < count; ++i) {
        Value value;
        if (hasSrc) LOOM_TRY(read(ls, step.src, src, i, &value));
        if (step.kind == StepKind::Reduce) {
          // dst = dst (op) src: the destination must already hold a partial value.
          Value acc;
          LOOM_TRY(read(ls, step.dst, dst, i, &acc));
          LOOM_TRY(combine(ls, acc, value, i, &value));
        } else if (incoming != nullptr) {
          if (reduces(step.kind)) {
            LOOM_TRY(combine(ls, incoming->data[i], value, i, &value));
          } else {
            value = incoming->data[i];
          }
        }
        if (step.finalize) LOOM_TRY(finalize(ls, i, &value));
        if (hasDst) LOOM_TRY(write(ls, step.dst, dst, i, value));
        if (outgoing != nullptr) outgoing->data[i] = value;
      }
    }
    if (in != nullptr) {
      in->head = (in->head + 1) % kSlots;
      --in->size;
    }
    if (out != nullptr) ++out->size;
    return Status::Ok();
  }

  // ---- Peer-memory plans -------------------------------------------------------------------------

  // Whether access a (made earlier) is ordered before b.
  bool ordered(const Access& a, const Access& b) const {
    return a.lane < 0 || a.lane == b.lane || (lanes_[a.lane].channel == lanes_[b.lane].channel && a.epoch < b.epoch);
  }

  std::string accessName(const Access& a) const {
    const LaneState& ls = lanes_[a.lane];
    return fmt::format("rank {} lane {} (between its Meets {} and {})", ls.rank, ls.lane, a.epoch, a.epoch + 1);
  }

  // The ranks a ref's count elements are at: its own, a peer, or every rank.
  std::vector<int> targets(const LaneState& ls, const BufRef& ref) const {
    if (ref.rank == kEveryRank) {
      std::vector<int> all(config_.nranks);
      for (int r = 0; r < config_.nranks; ++r) all[r] = r;
      return all;
    }
    return {ref.own() ? ls.rank : ref.rank};
  }

  // Resolves ref on rank `rank` (the step's count elements), and checks that a lane touches a peer's
  // memory only between its first and its last Meet (before, the peer's buffers may not be ready;
  // after, the peer may have returned).
  Status resolveOn(const LaneState& ls, int rank, const BufRef& ref, bool write, const char* role, uint64_t* cell) {
    const Step& step = stepOf(ls);
    const RankMemory& mem = memory_[rank];
    if (!ref.valid()) return fail(ls, "has no {} buffer", role);
    if (ref.buffer >= mem.buffers.size() || !mem.buffers[ref.buffer].present)
      return fail(ls, "{} names buffer {}, which rank {} does not have", role, ref.buffer, rank);
    const BufferSpec& spec = mem.buffers[ref.buffer];
    if (ref.offset > spec.size || step.count > spec.size - ref.offset)
      return fail(ls, "{} {}[{}..{}) of rank {} lies outside the buffer, which has {} element(s)", role, spec.name,
                  ref.offset, ref.offset + step.count, rank, spec.size);
    if (write && !spec.writable)
      return fail(ls, "writes {}[{}..{}) of rank {}, which is read-only input", spec.name, ref.offset,
                  ref.offset + step.count, rank);
    if (rank != ls.rank && (ls.epoch == 0 || ls.epoch >= ls.meets))
      return fail(ls, "touches rank {}'s {} {}", rank, spec.name,
                  ls.epoch == 0 ? "before its lane's first Meet (its buffers may not be ready)"
                                : "after its lane's last Meet (that rank may have returned)");
    *cell = spec.base + ref.offset;
    return Status::Ok();
  }

  Status peerRead(const LaneState& ls, int id, int rank, const BufRef& ref, uint64_t cell, uint64_t i, Value* value) {
    CellAccesses& acc = accesses_[rank][cell + i];
    const Access now{id, ls.epoch};
    const std::string name = fmt::format("rank {}'s {}[{}]", rank, memory_[rank].buffers[ref.buffer].name, ref.offset + i);
    if (!ordered(acc.write, now))
      return fail(ls, "reads {}, which {} writes: no Meet orders the two", name, accessName(acc.write));
    bool seen = false;
    for (Access& a : acc.reads)
      if (a.lane == id) {
        a.epoch = ls.epoch;
        seen = true;
      }
    if (!seen) acc.reads.push_back(now);
    *value = memory_[rank].cells[cell + i];
    if (!value->defined()) return fail(ls, "reads {} before anything was written to it", name);
    return Status::Ok();
  }

  Status peerWrite(const LaneState& ls, int id, int rank, const BufRef& ref, uint64_t cell, uint64_t i, const Value& value) {
    CellAccesses& acc = accesses_[rank][cell + i];
    const Access now{id, ls.epoch};
    const std::string name = fmt::format("rank {}'s {}[{}]", rank, memory_[rank].buffers[ref.buffer].name, ref.offset + i);
    if (!ordered(acc.write, now))
      return fail(ls, "writes {}, which {} also writes: no Meet orders the two", name, accessName(acc.write));
    for (const Access& a : acc.reads)
      if (!ordered(a, now)) return fail(ls, "writes {}, which {} reads: no Meet orders the two", name, accessName(a));
    acc.write = now;
    acc.reads.clear();
    memory_[rank].cells[cell + i] = value;
    return Status::Ok();
  }

  // A data step of a peer-memory plan (Copy, Reduce, ReduceRanks), element by element.
  Status executePeer(int id, const LaneState& ls) {
    const Step& step = stepOf(ls);
    const uint64_t count = step.count;
    const std::vector<int> from = targets(ls, step.src);
    const std::vector<int> to = targets(ls, step.dst);
    std::vector<uint64_t> src(from.size()), dst(to.size());
    for (size_t k = 0; k < from.size(); ++k) LOOM_TRY(resolveOn(ls, from[k], step.src, false, "source", &src[k]));
    for (size_t k = 0; k < to.size(); ++k) LOOM_TRY(resolveOn(ls, to[k], step.dst, true, "destination", &dst[k]));
    for (size_t k = 0; k < to.size(); ++k)
      for (size_t j = 0; j < from.size(); ++j)
        if (from[j] == to[k]) {
          LOOM_TRY(checkOverlap(ls, src[j], dst[k], count));
          if (step.kind == StepKind::Reduce && src[j] == dst[k]) return fail(ls, "reduces elements with themselves");
        }
    for (uint64_t i = 0; i < count; ++i) {
      Value value;
      LOOM_TRY(peerRead(ls, id, from[0], step.src, src[0], i, &value));
      if (step.kind == StepKind::ReduceRanks) {
        // In rank order: the first source is rank 0's, then each next rank's joins.
        for (size_t j = 1; j < from.size(); ++j) {
          Value next;
          LOOM_TRY(peerRead(ls, id, from[j], step.src, src[j], i, &next));
          LOOM_TRY(combine(ls, next, value, i, &value));
        }
      } else if (step.kind == StepKind::Reduce) {
        Value acc;
        LOOM_TRY(peerRead(ls, id, to[0], step.dst, dst[0], i, &acc));
        LOOM_TRY(combine(ls, acc, value, i, &value));
      }
      if (step.finalize) LOOM_TRY(finalize(ls, i, &value));
      for (size_t k = 0; k < to.size(); ++k) {
        // A copy onto itself (in place) changes nothing; the interpreter skips it.
        if (step.kind == StepKind::Copy && !step.finalize && from[0] == to[k] && src[0] == dst[k]) continue;
        LOOM_TRY(peerWrite(ls, id, to[k], step.dst, dst[k], i, value));
      }
    }
    return Status::Ok();
  }

  Status checkFinished() {
    int blocked = 0;
    const LaneState* first = nullptr;
    for (const LaneState& ls : lanes_) {
      if (ls.next >= stepCount(ls)) continue;
      ++blocked;
      if (first == nullptr) first = &ls;
    }
    if (first != nullptr) {
      const Step& step = stepOf(*first);
      if (step.kind == StepKind::Meet)
        return fail(*first, "deadlock: waits in Meet {} of channel {}, which not every rank's lane of that channel "
                            "reaches; {} lane(s) cannot progress",
                    first->epoch, first->channel, blocked);
      const int32_t in = first->inQueue[first->next];
      const std::string why = in >= 0 && queues_[in].size == 0
                                  ? fmt::format("waits for a message from rank {}", step.recvPeer)
                                  : fmt::format("waits for a free slot towards rank {}", step.sendPeer);
      return fail(*first, "deadlock: {} on channel {}; {} lane(s) cannot progress", why,
                  plans_[first->rank].lanes[first->lane].channel, blocked);
    }
    for (const Queue& q : queues_) {
      if (q.size == 0) continue;
      const Message& m = q.slots[q.head];
      return internalError("{} {}: rank {} lane {} step {} sent {} element(s) to rank {} on channel {} that no step "
                           "received ({} message(s) left)",
                           collectiveName(config_.coll), config_.layout, m.rank, m.lane, m.step, m.data.size(), q.dst,
                           q.channel, q.size);
    }
    return Status::Ok();
  }

  const MachineConfig& config_;
  const std::vector<Plan>& plans_;
  std::vector<RankMemory>& memory_;
  uint64_t full_ = 0;
  std::vector<LaneState> lanes_;
  std::vector<Queue> queues_;
  uint32_t channels_ = 1;
  std::vector<int32_t> queueOf_;
  std::vector<int> ready_;
  // Per rank and cell: the lane that wrote it (-1: none) and the lane that read it (-1: none, -2: several).
  std::vector<std::vector<int32_t>> writer_, reader_;
  // Peer-memory plans (a step names a Meet or another rank's memory): every access by lane and epoch
  // instead, per rank and cell, and how many lanes arrived at each (channel, Meet).
  bool peerMemory_ = false;
  std::vector<std::vector<CellAccesses>> accesses_;
  std::map<std::pair<uint32_t, uint32_t>, int> meetArrivals_;
};

}  // namespace

Status runPlans(const MachineConfig& config, const std::vector<Plan>& plans, std::vector<RankMemory>* memory) {
  if (config.nranks < 1 || config.nranks > 64)
    return invalidArgument("verifier: {} ranks; symbolic values track at most 64", config.nranks);
  Machine machine(config, plans, memory);
  return machine.run();
}

}  // namespace loom::verify
