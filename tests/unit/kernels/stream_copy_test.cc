// streamCopy must equal memcpy for every length and every alignment of source and destination (its
// aligned middle, plain head and tail), and leave the bytes around the destination alone.
#include "kernels/cpu/stream_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace loom {
namespace {

TEST(StreamCopy, EqualsMemcpyForEveryLengthAndAlignment) {
  constexpr size_t kGuard = 64;
  std::vector<uint8_t> src(1024 + 2 * kGuard), dst(src.size()), expected(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 + 11);
  for (size_t srcOff = 0; srcOff < 16; ++srcOff)
    for (size_t dstOff = 0; dstOff < 16; ++dstOff)
      for (size_t len : {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 511, 777, 1000}) {
        std::memset(dst.data(), 0xa5, dst.size());
        expected = dst;
        std::memcpy(expected.data() + kGuard + dstOff, src.data() + srcOff, len);
        streamCopy(dst.data() + kGuard + dstOff, src.data() + srcOff, len);
        ASSERT_EQ(dst, expected) << "len " << len << " src offset " << srcOff << " dst offset " << dstOff;
      }
}

TEST(StreamCopy, LargeCopyMatches) {
  std::vector<uint32_t> src(3 << 20), dst(src.size() + 1);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint32_t>(i * 2654435761u);
  streamCopy(reinterpret_cast<char*>(dst.data()) + 2, src.data(), src.size() * sizeof(uint32_t));
  EXPECT_EQ(std::memcmp(reinterpret_cast<char*>(dst.data()) + 2, src.data(), src.size() * sizeof(uint32_t)), 0);
}

}  // namespace
}  // namespace loom
