// The GPUDirect RDMA decision (transport/net/gdr_choice.h), pure: NCCL's levels by name and number,
// the default (PXB), dmabuf before nvidia-peermem, and a reason a user can act on for every refusal.
#include <gtest/gtest.h>

#include "text_checks.h"
#include "transport/net/gdr_choice.h"
#include "transport/net/provider.h"
#include "verbs_choice.h"

namespace loom::net {
namespace {

GdrFacts facts(PathType path, int ptrSupport, bool cudaDmabuf) {
  GdrFacts f;
  f.nic = "mlx5_0";
  f.gpuNicPath = static_cast<int>(path);
  f.ptrSupport = ptrSupport;
  f.cudaDmabuf = cudaDmabuf;
  f.cudaDmabufWhy = cudaDmabuf ? "" : "GPU 0's driver does not export dmabufs";
  return f;
}


TEST(GdrLevel, NcclNamesAndNumbers) {
  GdrLevel l;
  ASSERT_TRUE(parseGdrLevel("PIX", &l).ok());
  EXPECT_EQ(l.farthest, PathType::Pix);
  EXPECT_TRUE(l.set);
  ASSERT_TRUE(parseGdrLevel("phb", &l).ok());
  EXPECT_EQ(l.farthest, PathType::Phb);
  ASSERT_TRUE(parseGdrLevel("2", &l).ok());
  EXPECT_EQ(l.farthest, PathType::Pxb);
  ASSERT_TRUE(parseGdrLevel("5", &l).ok());
  EXPECT_EQ(l.farthest, PathType::Sys);
  ASSERT_TRUE(parseGdrLevel("LOC", &l).ok());
  EXPECT_TRUE(l.never);
  ASSERT_TRUE(parseGdrLevel("0", &l).ok());
  EXPECT_TRUE(l.never);
  const Status st = parseGdrLevel("NVL", &l);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  expectWords(st.message(), {"LOOM_NET_GDR_LEVEL=NVL", "PIX, PXB, PHB"});
  {
    ScopedEnv unset("LOOM_NET_GDR_LEVEL", std::nullopt);
    ASSERT_TRUE(gdrLevelFromEnvironment(&l).ok());
    EXPECT_FALSE(l.set);
    EXPECT_EQ(l.farthest, PathType::Pxb);  // NCCL's default
  }
  ScopedEnv sys("LOOM_NET_GDR_LEVEL", "SYS");
  ASSERT_TRUE(gdrLevelFromEnvironment(&l).ok());
  EXPECT_EQ(l.farthest, PathType::Sys);
}

TEST(GdrChoice, DmabufFirstThenPeermemWithinTheLevel) {
  const GdrLevel byDefault;
  GdrChoice c = chooseGdr(facts(PathType::Pxb, kHostPointers | kCudaPointers | kDmabufPointers, true), byDefault);
  EXPECT_EQ(c.mode, GdrMode::Dmabuf);
  expectWords(c.why, {"PXB", "mlx5_0", "dmabuf"});
  c = chooseGdr(facts(PathType::Pix, kHostPointers | kCudaPointers | kDmabufPointers, false), byDefault);
  EXPECT_EQ(c.mode, GdrMode::Peermem);
  expectWords(c.why, {"does not export dmabufs", "nvidia-peermem"});
  c = chooseGdr(facts(PathType::Pix, kHostPointers | kCudaPointers, true), byDefault);
  EXPECT_EQ(c.mode, GdrMode::Peermem);
}

TEST(GdrChoice, StagedWithTheReason) {
  const GdrLevel byDefault;
  const int all = kHostPointers | kCudaPointers | kDmabufPointers;
  // Through a CPU's host bridge: too far by default, allowed by LOOM_NET_GDR_LEVEL=PHB.
  GdrChoice c = chooseGdr(facts(PathType::Phb, all, true), byDefault);
  EXPECT_EQ(c.mode, GdrMode::Staged);
  expectWords(c.why, {"over PHB", "farther than the default level PXB"});
  GdrLevel phb;
  ASSERT_TRUE(parseGdrLevel("PHB", &phb).ok());
  EXPECT_EQ(chooseGdr(facts(PathType::Phb, all, true), phb).mode, GdrMode::Dmabuf);
  c = chooseGdr(facts(PathType::Sys, all, true), phb);
  EXPECT_EQ(c.mode, GdrMode::Staged);
  expectWords(c.why, {"over SYS", "LOOM_NET_GDR_LEVEL PHB"});
  // LOC: never.
  GdrLevel loc;
  ASSERT_TRUE(parseGdrLevel("LOC", &loc).ok());
  c = chooseGdr(facts(PathType::Pix, all, true), loc);
  EXPECT_EQ(c.mode, GdrMode::Staged);
  expectWords(c.why, {"LOOM_NET_GDR_LEVEL=LOC"});
  // A NIC that takes host memory only (the socket provider, a NIC without peermem or dmabuf).
  c = chooseGdr(facts(PathType::Pix, kHostPointers, true), byDefault);
  EXPECT_EQ(c.mode, GdrMode::Staged);
  expectWords(c.why, {"host memory only"});
  // dmabuf on the NIC only, and no peermem: the CUDA side is the reason.
  c = chooseGdr(facts(PathType::Pix, kHostPointers | kDmabufPointers, false), byDefault);
  EXPECT_EQ(c.mode, GdrMode::Staged);
  expectWords(c.why, {"does not export dmabufs", "nvidia-peermem is not loaded"});
  // A device the topology does not place (another NIC than the topology's, or no topology).
  GdrFacts unknown = facts(PathType::Pix, all, true);
  unknown.gpuNicPath = -1;
  c = chooseGdr(unknown, byDefault);
  EXPECT_EQ(c.mode, GdrMode::Staged);
  expectWords(c.why, {"no path from this GPU to mlx5_0"});
}

}  // namespace
}  // namespace loom::net
