// base/hash.h is FNV-1a as published: the reference vectors of the 64-bit variant, and the field
// framing that keeps ("ab", "c") apart from ("a", "bc").
#include <gtest/gtest.h>

#include <string>

#include "base/hash.h"

namespace loom {
namespace {

TEST(Fnv1a, MatchesThePublishedVectors) {
  EXPECT_EQ(Fnv1a().digest(), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a().text("a").digest(), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a().text("foobar").digest(), 0x85944171f73967e8ull);
}

TEST(Fnv1a, PiecesHashAsTheirConcatenation) {
  EXPECT_EQ(Fnv1a().text("foo").text("bar").digest(), Fnv1a().text("foobar").digest());
  const unsigned char bytes[] = {'f', 'o', 'o'};
  EXPECT_EQ(Fnv1a().bytes(bytes, sizeof bytes).digest(), Fnv1a().text("foo").digest());
}

TEST(Fnv1a, FieldsAndSeedsKeepInputsApart) {
  EXPECT_NE(Fnv1a().field("ab").field("c").digest(), Fnv1a().field("a").field("bc").digest());
  EXPECT_NE(Fnv1a(1).text("x").digest(), Fnv1a(2).text("x").digest());
  EXPECT_EQ(Fnv1a(0).text("x").digest(), Fnv1a().text("x").digest());
  const uint32_t v = 0x01020304;
  EXPECT_EQ(Fnv1a().value(v).digest(), Fnv1a().bytes(&v, sizeof v).digest());
}

}  // namespace
}  // namespace loom
