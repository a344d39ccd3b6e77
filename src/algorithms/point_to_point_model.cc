#include "algorithms/point_to_point_model.h"

#include <algorithm>

namespace loom {

double predictPointToPointUs(const MachineModel& machine, int rank, std::span<const P2pOp> ops, size_t elemSize,
                             uint64_t chunkBytes) {
  if (ops.empty()) return 0.0;
  const uint64_t chunk = std::max<uint64_t>(chunkBytes, 1);
  // Bytes by direction (0: send, 1: receive) and path (0: within the node, 1: across nodes).
  uint64_t bytes[2][2] = {};
  uint64_t copied = 0, messages = 0;
  double latency = 0.0;
  for (const P2pOp& op : ops) {
    const uint64_t b = op.count * elemSize;
    copied += b;
    messages += std::max<uint64_t>((b + chunk - 1) / chunk, 1);
    if (op.peer == rank) continue;  // a local copy: no fabric, no latency
    const bool across = op.peer == kAnyPeer ? machine.nodes() > 1 : !machine.sameNode(rank, op.peer);
    bytes[op.isSend ? 0 : 1][across ? 1 : 0] += b;
    latency = std::max(latency, across ? machine.netLatencyUs : machine.intraLatencyUs);
  }
  // The rank's share of the NIC its rail uses: NICs serve contiguous local ranks.
  const int nics = std::max(machine.nicsPerNode, 1);
  const int ranksPerNic = (machine.ranksInNode() + nics - 1) / nics;
  const double nicShareGbs = machine.nicGbs / std::max(ranksPerNic, 1);
  double busiest = 0.0;
  for (const auto& direction : bytes)
    busiest = std::max({busiest, transferUs(direction[0], machine.intraGbs), transferUs(direction[1], nicShareGbs)});
  return latency + busiest + transferUs(copied, machine.copyGbs) + machine.stepUs * static_cast<double>(messages);
}

}  // namespace loom
