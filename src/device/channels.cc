#include "device/channels.h"

#include <algorithm>

#include "algorithms/registry.h"

namespace loom::device {

Status maxLanesPerChannel(Algorithm algo, const PlanRequest& req, uint64_t* lanes) {
  // A count that gives every lane of one channel work (lanes without work are left out of plans),
  // small enough that building every rank's plan costs microseconds.
  PlanRequest probe = req;
  probe.nchannels = 1;
  probe.count = std::max<uint64_t>(1, static_cast<uint64_t>(req.nranks) * 2) * std::max<uint64_t>(1, req.chunkElems);
  // One message per peer (one-shot) holds the whole count, which must fit a message.
  if (algorithmEntry(algo).oneMessage) probe.count = std::max<uint64_t>(1, std::min(req.count, req.chunkElems));
  uint64_t most = 0;
  for (int r = 0; r < req.nranks; ++r) {
    probe.rank = r;
    Plan plan;
    LOOM_TRY(buildPlan(algo, probe, &plan));
    most = std::max<uint64_t>(most, plan.lanes.size());
  }
  *lanes = most;
  return Status::Ok();
}

int deviceChannels(uint64_t bytes, uint64_t lanesPerChannel, const DeviceChannelLimits& limits) {
  const uint64_t maxChannels = static_cast<uint64_t>(std::max(1, limits.maxChannels));
  uint64_t channels = std::clamp<uint64_t>(bytes / kDeviceBytesPerChannel, 1, maxChannels);
  if (lanesPerChannel > 0) channels = std::min(channels, std::max<uint64_t>(1, limits.laneBudget / lanesPerChannel));
  return static_cast<int>(channels);
}

uint64_t deviceOperationBytes(const PlanRequest& req) {
  // As the root sees it, whichever rank asks: a gather's or scatter's root holds n blocks where the
  // other ranks hold one, and every rank must reach the same channel count.
  PlanRequest root = req;
  root.rank = req.root;
  return std::max(sendBufferElems(root), recvBufferElems(root)) * req.elemSize;
}

}  // namespace loom::device
