// A hint to the core that this thread spins waiting on memory: it lets the sibling hyper-thread run
// and saves power while spinning. x86's `pause`, Arm's `yield` (NVIDIA Grace); elsewhere nothing but
// a compiler barrier, so the wait loop still re-reads memory.
#pragma once

#include <atomic>

namespace loom {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace loom
