// How many channels a plan kernel (plan_kernels.h) splits one operation over. On a GPU a channel's
// lane is one thread block, and one block moves only a few tens of GB/s (the bytes its threads keep in
// flight over the memory latency), so large operations need many channels to approach the copy limit,
// as NCCL's do; small ones need few, since every channel adds a message per step. The device tuner
// weighs the two (its machine's lanes run in parallel, algorithms/machine_model.h); what is left here is
// the cap: every block of every rank sharing a GPU must be resident at once (lanes wait on each other),
// so the lanes of one launch stay within a budget that all ranks agreed on. Pure functions of facts
// every rank has: all ranks reach the same count, which their plans must share.
#pragma once

#include <cstdint>

#include "algorithms/builders.h"
#include "base/status.h"

namespace loom::device {

struct DeviceChannelLimits {
  int maxChannels = 1;      // channels the p2p transport has FIFOs for
  uint64_t laneBudget = 1;  // blocks one rank's launch may have resident at once
};

// The most lanes any rank's plan has per channel for this shape (its channel count ignored): 1 for
// rings and trees, up to 2 x (nranks - 1) + 1 for direct all-to-all patterns.
Status maxLanesPerChannel(Algorithm algo, const PlanRequest& req, uint64_t* lanes);

// The tuner's channel count `tuned`, at least 1 and at most limits.maxChannels, and few enough that
// channels x lanesPerChannel stays within the lane budget (1 when even one channel does not fit: the
// launch then says so).
int deviceChannels(int tuned, uint64_t lanesPerChannel, const DeviceChannelLimits& limits);

}  // namespace loom::device
