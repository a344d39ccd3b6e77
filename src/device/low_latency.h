// Which of a plan kernel's messages travel as low-latency words (kernels/cuda/device_plan_layout.h,
// NCCL's LL protocol) rather than as a slot and a counter. A counter-published message costs its
// sender a release fence and its receiver a round trip on the counter before the data
// (kSimpleHandshakeUs); a low-latency one moves twice the bytes and needs neither. So low latency wins
// below handshake x a lane's bandwidth (kLaneBytesPerUs), within what a low-latency slot holds. Pure
// host rules, the same on every rank.
#pragma once

#include <cstdint>

namespace loom::device {

// One lane (a block of the plan kernel) copies about this many bytes per microsecond: 30 GB/s, measured
// on an H100 (docs/PERFORMANCE.md, "GPU": a one-rank allreduce ran as a single lane).
inline constexpr double kLaneBytesPerUs = 30000;
// A release store at system scope and the receiver's poll of the counter it publishes: a first
// estimate (a fence across PCIe/NVLink is about a microsecond), to be measured on a GPU.
inline constexpr double kSimpleHandshakeUs = 1.5;

// The largest message that travels as low-latency words under the model above (at most
// cuda::kLowLatencyBytes).
uint64_t modelLowLatencyBytes(double laneBytesPerUs, double handshakeUs);

// The communicator's threshold: LOOM_DEVICE_LL_BYTES when set (0: never; the same on every rank),
// else the model's.
uint64_t lowLatencyBytesSetting();

}  // namespace loom::device
