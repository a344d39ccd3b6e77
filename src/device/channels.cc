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

int deviceChannels(int tuned, uint64_t lanesPerChannel, const DeviceChannelLimits& limits) {
  uint64_t channels = static_cast<uint64_t>(std::clamp(tuned, 1, std::max(1, limits.maxChannels)));
  if (lanesPerChannel > 0) channels = std::min(channels, std::max<uint64_t>(1, limits.laneBudget / lanesPerChannel));
  return static_cast<int>(channels);
}

}  // namespace loom::device
