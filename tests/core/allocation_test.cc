// A blocking communicator's small operations allocate nothing on the heap once warm: plans come from
// the communicator's cache, and the vectors of a call (its operations, communicators, bound plans,
// runners) are the calling thread's, kept from call to call. Counted by replacing the program's
// operator new (the library's allocations go through it too) with one that counts per thread.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <vector>

#include "thread_ranks.h"

namespace {

thread_local long allocations = 0;

}  // namespace

// Every form that pairs with the replaced deletes (the standard library's temporary buffers use the
// nothrow one; AddressSanitizer insists that new and delete match). The aligned forms stay the
// runtime's, with their own deletes.
void* operator new(size_t bytes) {
  ++allocations;
  if (void* p = std::malloc(bytes ? bytes : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t bytes, const std::nothrow_t&) noexcept {
  ++allocations;
  return std::malloc(bytes ? bytes : 1);
}
void* operator new[](size_t bytes) { return operator new(bytes); }
void* operator new[](size_t bytes, const std::nothrow_t& tag) noexcept { return operator new(bytes, tag); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

// Heap allocations this thread makes in `calls` repetitions of `call`, after 20 untimed ones.
template <typename Call>
long allocationsOf(int calls, Call&& call) {
  for (int i = 0; i < 20; ++i) call();
  const long before = allocations;
  for (int i = 0; i < calls; ++i) call();
  return allocations - before;
}

TEST(Allocations, SmallBlockingOperationsAllocateNothingOnceWarm) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  runThreadRanks(2, config, [](int rank, loomComm_t comm) {
    float in[2] = {1, 2}, out[2] = {0, 0};
    const long allReduce = allocationsOf(200, [&] {
      ASSERT_EQ(loomAllReduce(in, out, 2, loomFloat32, loomSum, comm, nullptr), loomSuccess);
    });
    EXPECT_EQ(allReduce, 0) << "rank " << rank << ": heap allocations in 200 allreduces of 8 B";
    const long sendRecv = allocationsOf(200, [&] {
      if (rank == 0)
        ASSERT_EQ(loomSend(in, 2, loomFloat32, 1, comm, nullptr), loomSuccess);
      else
        ASSERT_EQ(loomRecv(out, 2, loomFloat32, 0, comm, nullptr), loomSuccess);
    });
    EXPECT_EQ(sendRecv, 0) << "rank " << rank << ": heap allocations in 200 sends/receives of 8 B";
  });
}

}  // namespace
