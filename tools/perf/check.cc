#include "check.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "element_codec.h"
#include "setting.h"

namespace loomperf {

void prepareBuffers(loomDataType_t type, const ValuePattern& pattern, const RankView& view,
                    const BufferView& buffers) {
  visitCodec(type, [&](auto codec) {
    using Codec = decltype(codec);
    using T = typename Codec::Storage;
    T* recv = static_cast<T*>(buffers.recv);
    const T poison = Codec::poison();
    for (size_t i = 0; i < buffers.recvCount; ++i) recv[i] = poison;
    T* send = static_cast<T*>(buffers.send);
    for (size_t i = 0; i < buffers.sendCount; ++i) send[i] = Codec::encode(pattern.input(view.rank, i));
  });
}

uint64_t countWrong(const Collective& collective, loomDataType_t type, const ValuePattern& pattern,
                    const RankView& view, const BufferView& buffers) {
  if (!collective.hasOutput(view)) return 0;
  return visitCodec(type, [&](auto codec) {
    using Codec = decltype(codec);
    using T = typename Codec::Storage;
    const T* recv = static_cast<const T*>(buffers.recv);
    uint64_t wrong = 0;
    for (size_t j = 0; j < buffers.recvCount; ++j) {
      const double want = collective.expected(pattern, view, j);
      const double got = Codec::decode(recv[j]);
      // NaN (the poison) fails both comparisons, so an element never written counts as wrong.
      const bool ok = got == want || std::fabs(got - want) <= pattern.tolerance(want);
      if (!ok) {
        if (wrong == 0 && loomSetting("LOOM_PERF_VERBOSE_CHECK") == "1")
          std::fprintf(stderr, "loom-perf: rank %d: %s: element %zu is %g, expected %g\n", view.rank,
                       collective.name, j, got, want);
        ++wrong;
      }
    }
    return wrong;
  });
}

}  // namespace loomperf
