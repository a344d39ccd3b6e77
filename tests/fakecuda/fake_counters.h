// What FakeCuda counts of the calls made to it, for tests that assert what a code path does not do:
// allocate or free memory (device, pinned, managed, stream-ordered), make the host wait for a whole
// device (an implicit or explicit device synchronization, the legacy stream's synchronous copies), or
// copy host memory to the device (an encoded plan's upload). Process-wide; reset between phases.
#pragma once

#include <cstdint>

namespace fakecuda {

struct CallCounts {
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t deviceSynchronizations = 0;
  uint64_t hostToDeviceCopies = 0;
  uint64_t hostWaits = 0;  // cudaStreamSynchronize, cudaEventSynchronize: the host waits for one stream
};

CallCounts callCounts();
void resetCallCounts();

// For the runtime's own files.
void countAllocation();
void countFree();
void countDeviceSynchronization();
void countHostToDeviceCopy();
void countHostWait();

}  // namespace fakecuda
