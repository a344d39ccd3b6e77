#include "algorithms/plan_simulator.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

namespace loom {
namespace {

struct SimStep {
  int32_t in = -1;   // connection consumed, -1: none
  int32_t out = -1;  // connection fed, -1: none
  double bytes = 0;
  // Peer-memory plans: a Meet, and the bytes a step reads from peers' memory and writes into it
  // (they cross the rank's ports, as messages do).
  bool meet = false;
  double peerIn = 0, peerOut = 0;
};

struct SimLane {
  int rank = 0;
  uint32_t next = 0, end = 0;  // indices into the flat step array
  double ready = 0;            // when the previous step ended
  uint32_t channel = 0;
  uint32_t meets = 0;          // Meets passed
};

// The lanes of one channel at one of their Meets: how many arrived, the latest arrival, who waits.
struct MeetState {
  int arrived = 0;
  double latest = 0;
  std::vector<int> waiting;
};

// One direction of one (rank pair, channel) connection, in the frame of the receiving representative.
struct Connection {
  int waitingReceiver = -1;  // lane blocked on the next message, -1: none
  int waitingSender = -1;    // lane blocked on a free slot, -1: none
  uint64_t sent = 0, consumed = 0;
  int tx = 0, rx = 0;        // resources the transfer occupies
  double gbs = 0, latencyUs = 0;
};

struct Event {
  double time;
  int lane;
  bool operator>(const Event& o) const { return time > o.time || (time == o.time && lane > o.lane); }
};

class Simulator {
 public:
  Simulator(const MachineModel& m, const std::vector<Plan>& plans, size_t elemSize)
      : m_(m), plans_(plans), elemSize_(elemSize), g_(static_cast<int>(plans.size())), slots_(m.fifoSlots) {}

  Status run(SimulationResult* result) {
    LOOM_TRY(flatten());
    // An engine per rank, or per lane where a rank's lanes run side by side (a GPU's blocks).
    const size_t engines = m_.lanesInParallel ? lanes_.size() : static_cast<size_t>(g_);
    std::vector<double> engine(engines, 0.0), engineLoad(engines, 0.0);
    const bool engineCost = m_.stepUs > 0 || m_.copyGbs > 0;
    for (size_t id = 0; id < lanes_.size(); ++id) schedule(static_cast<int>(id));
    double finish = 0;
    while (!queue_.empty()) {
      const Event ev = queue_.top();
      queue_.pop();
      SimLane& lane = lanes_[ev.lane];
      const SimStep& step = steps_[lane.next];
      // Events come in time order, so shared resources (engines, ports) are booked in time order.
      const double start = ev.time;
      double end = start;
      if (step.meet) {  // every lane of the channel arrived (schedule); the meeting costs one hop
        lane.ready = start;
        ++lane.meets;
        ++lane.next;
        schedule(ev.lane);
        continue;
      }
      if (engineCost) {
        const double work = m_.stepUs + transferUs(step.bytes, m_.copyGbs);
        const size_t e = m_.lanesInParallel ? static_cast<size_t>(ev.lane) : static_cast<size_t>(lane.rank);
        end = std::max(start, engine[e]) + work;
        engine[e] = end;
        engineLoad[e] += work;
      }
      // Peer-memory reads and writes cross the rank's ports while its engine computes.
      auto overPort = [&](int port, double bytes) {
        const double duration = transferUs(bytes, m_.intraGbs);
        const double from = std::max(start, busy_[port]);
        busy_[port] = from + duration;
        load_[port] += duration;
        end = std::max(end, from + duration);
      };
      if (step.peerIn > 0) overPort(g_ + lane.rank, step.peerIn);
      if (step.peerOut > 0) overPort(lane.rank, step.peerOut);
      if (step.in >= 0) {
        Connection& c = conns_[step.in];
        release_[slot(step.in, c.consumed)] = end;
        ++c.consumed;
        if (c.waitingSender >= 0) {
          const int sender = c.waitingSender;
          c.waitingSender = -1;
          schedule(sender);
        }
      }
      if (step.out >= 0) {
        Connection& c = conns_[step.out];
        // The sender's port streams the message out as soon as it is free; the receiver's port takes
        // it in as soon as it is free and the data has started to flow (a switch buffers the rest).
        const double duration = transferUs(step.bytes, c.gbs);
        const double out = std::max(end, busy_[c.tx]);
        busy_[c.tx] = out + duration;
        const double in = std::max(out, busy_[c.rx]);
        busy_[c.rx] = in + duration;
        load_[c.tx] += duration;
        load_[c.rx] += duration;
        arrive_[slot(step.out, c.sent)] = in + duration + c.latencyUs;
        ++c.sent;
        ++result->messages;
        if (c.waitingReceiver >= 0) {
          const int receiver = c.waitingReceiver;
          c.waitingReceiver = -1;
          schedule(receiver);
        }
      }
      ++result->steps;
      lane.ready = end;
      finish = std::max(finish, end);
      ++lane.next;
      schedule(ev.lane);
    }
    for (const SimLane& lane : lanes_) {
      if (lane.next < lane.end)
        return internalError("simulator: rank {} cannot complete step {} of its plan ({} of {} ranks simulated)",
                             lane.rank, lane.next, g_, m_.nranks);
    }
    for (const Connection& c : conns_)
      if (c.sent != c.consumed) return internalError("simulator: {} message(s) sent but never received", c.sent - c.consumed);
    result->timeUs = finish + m_.launchUs;
    for (double load : load_) result->busiestUs = std::max(result->busiestUs, load);
    for (double load : engineLoad) result->busiestUs = std::max(result->busiestUs, load);
    return Status::Ok();
  }

 private:
  // Queues the lane's next step at the time it can start, or registers the lane with the connection
  // it waits for (which schedules it again when the message is sent or the slot freed).
  void schedule(int id) {
    const SimLane& lane = lanes_[id];
    if (lane.next >= lane.end) return;
    const SimStep& step = steps_[lane.next];
    double start = lane.ready;
    if (step.meet) {
      // The k-th Meet of a channel: every simulated rank's lane of that channel (a symmetric run's
      // representatives stand for the others), released together one hop after the last arrival.
      MeetState& ms = meets_[(static_cast<uint64_t>(lane.channel) << 32) | lane.meets];
      ++ms.arrived;
      ms.latest = std::max(ms.latest, start);
      ms.waiting.push_back(id);
      if (ms.arrived < lanesOfChannel_[lane.channel]) return;
      for (int waiting : ms.waiting) queue_.push(Event{ms.latest + m_.intraLatencyUs, waiting});
      return;
    }
    if (step.in >= 0) {
      Connection& c = conns_[step.in];
      if (c.sent <= c.consumed) {
        c.waitingReceiver = id;
        return;
      }
      start = std::max(start, arrive_[slot(step.in, c.consumed)]);
    }
    if (step.out >= 0) {
      Connection& c = conns_[step.out];
      if (c.sent >= static_cast<uint64_t>(slots_)) {
        const uint64_t freedBy = c.sent - slots_;  // the message whose slot this one reuses
        if (c.consumed <= freedBy) {
          c.waitingSender = id;
          return;
        }
        start = std::max(start, release_[slot(step.out, freedBy)]);
      }
    }
    queue_.push(Event{start, id});
  }

  size_t slot(int32_t conn, uint64_t message) const {
    return static_cast<size_t>(conn) * slots_ + static_cast<size_t>(message % slots_);
  }

  // Builds lanes, steps and connections; a message towards rank q is routed to the representative
  // q mod g, as sent by the sender shifted by the same multiple of g.
  Status flatten() {
    const int n = m_.nranks;
    if (g_ < 1 || n % g_ != 0) return invalidArgument("simulator: {} plan(s) for {} ranks", g_, n);
    const int k = m_.ranksInNode();
    const int repNodes = (g_ - 1) / k + 1;
    const int nics = m_.nicsPerNode;
    busy_.assign(2 * g_ + 2 * repNodes * nics, 0.0);
    load_.assign(busy_.size(), 0.0);
    for (int r = 0; r < g_; ++r) {
      const Plan& plan = plans_[r];
      if (plan.rank != r || plan.nranks != n)
        return invalidArgument("simulator: plan {} is rank {} of {}, expected rank {} of {}", r, plan.rank, plan.nranks, r, n);
      for (const Lane& lane : plan.lanes) {
        SimLane sl;
        sl.rank = r;
        sl.next = static_cast<uint32_t>(steps_.size());
        sl.channel = lane.channel;
        if (lanesOfChannel_.size() <= lane.channel) lanesOfChannel_.resize(lane.channel + 1, 0);
        ++lanesOfChannel_[lane.channel];
        // A lane talks to few peers: remember its last ones before asking the index.
        int lastPeer[2] = {-1, -1};
        int32_t lastConn[2] = {-1, -1};
        auto cached = [&](int dir, int peer, auto&& lookup) {
          if (peer != lastPeer[dir]) {
            lastPeer[dir] = peer;
            lastConn[dir] = lookup();
          }
          return lastConn[dir];
        };
        for (const Step& step : lane.steps) {
          SimStep ss;
          ss.bytes = static_cast<double>(step.count) * static_cast<double>(elemSize_);
          ss.meet = step.kind == StepKind::Meet;
          if (step.kind == StepKind::ReduceRanks || !step.src.own() || !step.dst.own()) {
            // n sources (ReduceRanks) or one, one destination or every rank's: n - 1 of them peers'.
            const double others = static_cast<double>(n - 1);
            const double sources = step.src.rank == kEveryRank ? static_cast<double>(n) : 1.0;
            const double targets = step.dst.rank == kEveryRank ? static_cast<double>(n) : 1.0;
            ss.peerIn = step.src.rank == kEveryRank ? others * ss.bytes : step.src.own() ? 0.0 : ss.bytes;
            ss.peerOut = step.dst.rank == kEveryRank ? others * ss.bytes : step.dst.own() ? 0.0 : ss.bytes;
            // The engine's work in the unit of a message step's (a RecvReduceSend reads two operands and
            // writes one or two per byte, and counts once): n sources or targets are n / 2 such steps.
            ss.bytes *= std::max(1.0, std::max(sources, targets) / 2);
          }
          if (step.recvPeer >= 0)
            ss.in = cached(0, step.recvPeer, [&] { return connection(step.recvPeer, r, lane.channel, repNodes); });
          if (step.sendPeer >= 0) {
            const int q = step.sendPeer;
            ss.out = cached(1, q, [&] {
              const int shift = q - q % g_;
              return connection(((r - shift) % n + n) % n, q % g_, lane.channel, repNodes);
            });
          }
          if (ss.in < -1 || ss.out < -1) return invalidArgument("simulator: rank {} names a peer out of range", r);
          steps_.push_back(ss);
        }
        sl.end = static_cast<uint32_t>(steps_.size());
        lanes_.push_back(sl);
      }
    }
    arrive_.assign(conns_.size() * slots_, 0.0);
    release_.assign(conns_.size() * slots_, 0.0);
    queue_ = decltype(queue_)(std::greater<Event>{}, [&] {
      std::vector<Event> storage;
      storage.reserve(lanes_.size());
      return storage;
    }());
    return Status::Ok();
  }

  // The connection from real rank src to representative dst on channel; -2 for a bad peer.
  int32_t connection(int src, int dst, uint32_t channel, int repNodes) {
    const int n = m_.nranks;
    if (src < 0 || src >= n || dst < 0 || dst >= g_) return -2;
    const uint64_t key = (static_cast<uint64_t>(channel) * n + src) * g_ + dst;
    auto [it, inserted] = index_.emplace(key, static_cast<int32_t>(conns_.size()));
    if (!inserted) return it->second;
    Connection c;
    const int srcRep = src % g_;  // behaves like src, the machine being symmetric under shifts by g
    if (m_.sameNode(src, dst)) {
      c.tx = srcRep;
      c.rx = g_ + dst;
      c.gbs = m_.intraGbs;
      c.latencyUs = m_.intraLatencyUs;
    } else {
      const int nics = m_.nicsPerNode;
      c.tx = 2 * g_ + m_.nodeOf(srcRep) * nics + m_.nicOf(srcRep);
      c.rx = 2 * g_ + repNodes * nics + m_.nodeOf(dst) * nics + m_.nicOf(dst);
      c.gbs = m_.nicGbs;
      c.latencyUs = m_.netLatencyUs;
    }
    conns_.push_back(c);
    return it->second;
  }

  const MachineModel& m_;
  const std::vector<Plan>& plans_;
  size_t elemSize_;
  int g_;
  int slots_;
  std::vector<SimLane> lanes_;
  std::vector<SimStep> steps_;
  std::vector<Connection> conns_;
  std::unordered_map<uint64_t, int32_t> index_;
  std::vector<double> arrive_, release_;  // per connection and slot: message arrival, slot release
  std::vector<int> lanesOfChannel_;       // simulated lanes on each channel (peer-memory Meets)
  std::unordered_map<uint64_t, MeetState> meets_;  // by (channel, Meet)
  std::vector<double> busy_;              // per port/NIC direction: busy until
  std::vector<double> load_;              // per port/NIC direction: total transfer time
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
};

}  // namespace

Status simulatePlans(const MachineModel& machine, const std::vector<Plan>& plans, size_t elemSize,
                     SimulationResult* result) {
  LOOM_TRY(machine.validate());
  *result = SimulationResult{};
  Simulator sim(machine, plans, elemSize);
  return sim.run(result);
}

}  // namespace loom
