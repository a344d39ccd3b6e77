// The job's topology (topology/job_topology.h) from the fixtures, without a communicator: one host's
// rings are loom-topo's, several hosts' rings cross between hosts once per host and spread their
// channels over the NICs, ranks that disagree about their host are refused, and the device model tells
// NVLink from PCIe machines by the plans it picks.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "algorithms/machine_model.h"
#include "algorithms/tuner.h"
#include "fixtures.h"
#include "topology/job_topology.h"

namespace loom::testing {
namespace {

const char* const kFixtures[] = {"hwloc-dgx2-16xV100-nvswitch.xml", "nccl-hgx-8xA100-nvswitch-4xcx6.xml",
                                 "hwloc-power8-4xP100-nvlink.xml", "hwloc-2xP100-pcie-switch-cx5.xml",
                                 "nccl-azure-ndv4-topo.xml", "hwloc-2socket-pci-gpu-ib.xml"};

SystemGraph load(const std::string& path) {
  SystemGraph g;
  const Status st = loadTopologyFile(path, &g);
  EXPECT_TRUE(st.ok()) << st.message();
  return g;
}

void expectEveryRankOnce(const std::vector<int>& ring, int nranks) {
  std::vector<int> sorted = ring;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> all(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) all[static_cast<size_t>(r)] = r;
  EXPECT_EQ(sorted, all);
}

TEST(JobTopology, OneHostsRingsAreTheTopologySearchs) {
  for (const char* name : kFixtures) {
    SCOPED_TRACE(name);
    LOOM_FIXTURE_OR_SKIP(path, name);
    const SystemGraph g = load(path);
    GpuChannels search;
    ASSERT_TRUE(searchChannels(g, {}, &search).ok());
    JobTopology job;
    ASSERT_TRUE(modelJob(g, g.gpuCount(), 0, 0, &job).ok());
    EXPECT_EQ(job.hosts(), 1);
    EXPECT_EQ(job.rings, search.rings);  // ranks stand for GPUs 0..n-1: rank r is GPU r
    for (const std::vector<int>& ring : job.rings) {
      expectEveryRankOnce(ring, g.gpuCount());
      if (g.gpuCount() > 1) {
        EXPECT_GE(ringBottleneckGbs(g, ring), search.ringChannelGbs * (1 - 1e-9));
      }
    }
  }
}

TEST(JobTopology, RanksOnSomeOfAHostsGpusAreSearchedAmongThem) {
  LOOM_FIXTURE_OR_SKIP(path, "nccl-azure-ndv4-topo.xml");
  const SystemGraph g = load(path);
  JobTopology job;
  ASSERT_TRUE(modelJob(g, 3, 0, 0, &job).ok());  // GPUs 0, 1, 2 of 8
  for (const std::vector<int>& ring : job.rings) expectEveryRankOnce(ring, 3);
  ChannelSearchOptions subset;
  subset.gpus = {0, 1, 2};
  GpuChannels search;
  ASSERT_TRUE(searchChannels(g, subset, &search).ok());
  EXPECT_EQ(job.rings, search.rings);
}

// Several hosts: every ring enters and leaves each host once, in host order, and channel c goes through
// NIC c mod NICs of every host, entering at a rank as close to it as any.
void expectRailRings(const SystemGraph& g, int hosts, int perHost) {
  JobTopology job;
  ASSERT_TRUE(modelJob(g, hosts * perHost, perHost, 0, &job).ok());
  ASSERT_EQ(job.hosts(), hosts);
  EXPECT_EQ(job.ranksPerHost, perHost);
  EXPECT_GE(static_cast<int>(job.rings.size()), std::min(g.nicCount(), kMaxJobChannels));
  std::set<int> nicsUsed;
  for (size_t c = 0; c < job.rings.size(); ++c) {
    const std::vector<int>& ring = job.rings[c];
    expectEveryRankOnce(ring, hosts * perHost);
    int crossings = 0;
    for (size_t i = 0; i < ring.size(); ++i)
      crossings += job.hostOf[static_cast<size_t>(ring[i])] != job.hostOf[static_cast<size_t>(ring[(i + 1) % ring.size()])];
    EXPECT_EQ(crossings, hosts) << "ring " << c;
    for (int h = 0; h < hosts; ++h) {
      const int nic = job.channelNics[c][static_cast<size_t>(h)];
      EXPECT_EQ(nic, static_cast<int>(c) % g.nicCount());
      nicsUsed.insert(nic);
      // The ring enters host h at its first rank in the ring: none of the host's ranks is closer to the NIC.
      const int entry = *std::find_if(ring.begin(), ring.end(), [&](int r) { return job.hostOf[static_cast<size_t>(r)] == h; });
      const Path& best = g.gpuNicPath(job.placements[static_cast<size_t>(entry)].gpu, nic);
      for (int r : job.hostRanks[static_cast<size_t>(h)]) {
        const Path& other = g.gpuNicPath(job.placements[static_cast<size_t>(r)].gpu, nic);
        EXPECT_LE(best.type, other.type) << "ring " << c << " enters host " << h << " at rank " << entry;
      }
    }
  }
  EXPECT_EQ(static_cast<int>(nicsUsed.size()), std::min(g.nicCount(), static_cast<int>(job.rings.size())));
}

TEST(JobTopology, SeveralHostsCrossOncePerHostAndSpreadOverTheNics) {
  LOOM_FIXTURE_OR_SKIP(path, "nccl-hgx-8xA100-nvswitch-4xcx6.xml");
  const SystemGraph g = load(path);
  ASSERT_GT(g.nicCount(), 1);
  expectRailRings(g, 2, 8);
  expectRailRings(g, 4, 8);
  expectRailRings(g, 2, 4);
}

// What GPUDirect RDMA is decided on (transport/net/gdr_choice.h): each rank's path from its GPU to its
// NIC, and none for ranks without a GPU.
TEST(JobTopology, EachRankKnowsHowFarItsNicIsFromItsGpu) {
  LOOM_FIXTURE_OR_SKIP(path, "nccl-hgx-8xA100-nvswitch-4xcx6.xml");
  const SystemGraph g = load(path);
  JobTopology job;
  ASSERT_TRUE(modelJob(g, 16, 8, 0, &job).ok());
  ASSERT_EQ(job.nicPathOf.size(), 16u);
  for (int r = 0; r < 16; ++r) {
    const int gpu = r % 8;
    ASSERT_GE(job.nicOf[static_cast<size_t>(r)], 0);
    EXPECT_EQ(job.nicPathOf[static_cast<size_t>(r)],
              static_cast<int>(g.gpuNicPath(gpu, job.nicOf[static_cast<size_t>(r)]).type)) << "rank " << r;
  }
  EXPECT_EQ(job.nicPathOf[0], static_cast<int>(PathType::Pxb));  // GPU0 and mlx5_bond_1 share a switch level
}

TEST(JobTopology, HostsWithoutGpusSpreadTheirCrossingsOverTheirRanks) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-2socket-pci-gpu-ib.xml");
  SystemGraph g = load(path);
  // Ranks without a GPU (as on a live CPU-only host): build placements by hand.
  std::vector<RankPlacement> placements(6);
  for (int r = 0; r < 6; ++r) {
    placements[static_cast<size_t>(r)].hostHash = static_cast<uint64_t>(r / 3) + 1;
    placements[static_cast<size_t>(r)].numa = 0;
  }
  std::vector<HostChannelRecord> records(6);
  for (int h = 0; h < 2; ++h) {
    std::vector<int> ranks{3 * h, 3 * h + 1, 3 * h + 2};
    std::vector<HostChannelRecord> host;
    ASSERT_TRUE(chooseHostChannels(g, ranks, placements, &host).ok());
    for (int i = 0; i < 3; ++i) records[static_cast<size_t>(ranks[static_cast<size_t>(i)])] = host[static_cast<size_t>(i)];
  }
  JobTopology job;
  ASSERT_TRUE(assembleJob(placements, records, &job).ok());
  for (int r = 0; r < 6; ++r) EXPECT_EQ(job.nicPathOf[static_cast<size_t>(r)], -1) << "rank " << r << " has no GPU";
  std::set<int> entries;
  for (const std::vector<int>& ring : job.rings) entries.insert(ring.front());
  EXPECT_GE(job.rings.size(), 3u);
  EXPECT_EQ(entries.size(), 3u) << "the channels enter host 0 at each of its ranks";
}

TEST(JobTopology, RanksThatDisagreeAboutTheirHostAreRefused) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-power8-4xP100-nvlink.xml");
  const SystemGraph g = load(path);
  std::vector<RankPlacement> placements(4);
  for (int r = 0; r < 4; ++r) {
    PlacementInputs in;
    in.localIndex = r;
    ASSERT_TRUE(placeRank(g, in, &placements[static_cast<size_t>(r)]).ok());
    placements[static_cast<size_t>(r)].hostHash = 7;
  }
  std::vector<HostChannelRecord> records;
  ASSERT_TRUE(chooseHostChannels(g, std::vector<int>{0, 1, 2, 3}, placements, &records).ok());
  JobTopology job;
  EXPECT_TRUE(assembleJob(placements, records, &job).ok());
  placements[2].graphFingerprint ^= 1;  // rank 2 read another file
  const Status st = assembleJob(placements, records, &job);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("ranks 0 and 2 share a host but see different topologies"), std::string::npos)
      << st.message();
}

TEST(JobTopology, PlacementByDeviceOverrideAndCpus) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-dgx2-16xV100-nvswitch.xml");
  const SystemGraph g = load(path);
  RankPlacement p;
  PlacementInputs in;
  in.localIndex = 17;
  ASSERT_TRUE(placeRank(g, in, &p).ok());
  EXPECT_EQ(p.gpu, 1);  // 17 mod 16 GPUs
  in.gpuOverride = {3, 5};
  in.localIndex = 1;
  ASSERT_TRUE(placeRank(g, in, &p).ok());
  EXPECT_EQ(p.gpu, 5);
  in.localIndex = 2;
  Status st = placeRank(g, in, &p);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("LOOM_TOPO_GPU names 2 GPU(s)"), std::string::npos) << st.message();
  in.gpuOverride = {16};
  in.localIndex = 0;
  st = placeRank(g, in, &p);
  EXPECT_NE(st.message().find("GPU 16 is not one of the 16"), std::string::npos) << st.message();
  // A CUDA device is placed by its bus id.
  PlacementInputs cuda;
  cuda.cudaDevice = 0;
  cuda.cudaBusId = g.node(g.gpus()[9]).busId;
  ASSERT_TRUE(placeRank(g, cuda, &p).ok());
  EXPECT_EQ(p.gpu, 9);
  EXPECT_EQ(p.numa, g.node(g.cpuOf(g.gpus()[9])).numaId);
}

TEST(JobTopology, ACpuRankIsOnTheNumaNodeOfItsCpus) {
  LOOM_FIXTURE_OR_SKIP(path, "hwloc-2socket-pci-gpu-ib.xml");
  const SystemGraph g = load(path);
  ASSERT_GE(g.cpus().size(), 2u);
  SystemGraph live = g;
  live.source = "live";  // a live graph gives CPU ranks no GPU to stand for
  const Node& second = g.node(g.cpus()[1]);
  PlacementInputs in;
  in.cpuList = second.cpuList;
  RankPlacement p;
  ASSERT_TRUE(placeRank(live, in, &p).ok());
  EXPECT_EQ(p.gpu, -1);
  EXPECT_EQ(p.numa, second.numaId);
}

// The device model of an NVSwitch machine and of a PCIe-only one with as many GPUs: the cost model
// makes them pick different plans for some sizes (decisions, not timings).
TEST(JobTopology, TheDeviceModelTellsNvlinkFromPcie) {
  LOOM_FIXTURE_OR_SKIP(nvlink, "nccl-hgx-8xA100-nvswitch-4xcx6.xml");
  LOOM_FIXTURE_OR_SKIP(pcie, "nccl-azure-ndv4-topo.xml");
  std::vector<std::string> choices[2];
  const std::string paths[2] = {nvlink, pcie};
  for (int m = 0; m < 2; ++m) {
    JobTopology job;
    ASSERT_TRUE(modelJob(load(paths[m]), 8, 0, 0, &job).ok());
    const MachineModel machine = jobMachine(job, MemorySide::Device);
    EXPECT_GT(m == 0 ? machine.intraGbs : 1e9, 200.0);       // NVSwitch: 240 GB/s rings
    EXPECT_LT(m == 1 ? machine.intraGbs : 0.0, 50.0);        // PCIe
    EXPECT_LT(machine.intraLatencyUs, m == 0 ? 4.0 : 1e9);  // NVLink latency
    Tuner tuner(machine, job.rings);
    for (uint64_t bytes = 8; bytes <= (uint64_t{1} << 28); bytes *= 4) {
      TuneRequest req;
      req.coll = Collective::AllReduce;
      req.count = bytes / 4;
      req.elemSize = 4;
      req.maxChannels = 16;
      TuneChoice choice;
      ASSERT_TRUE(tuner.choosePlan(req, &choice).ok());
      choices[m].push_back(std::string(algorithmName(choice.algorithm)) + "/" + std::to_string(choice.nchannels) +
                           "/" + std::to_string(choice.chunkElems));
    }
  }
  EXPECT_NE(choices[0], choices[1]);
}

// Ranks sharing one GPU move their bytes through its memory: the device machine's fabric is that GPU's
// copy rate divided among them (the measured one, else the assumed), its lanes run in parallel, and the
// device tuner splits a large operation over many channels and a small one over few.
TEST(JobMachine, RanksSharingAGpuShareItsCopyRate) {
  JobTopology job;
  job.nranks = 2;
  job.placements.resize(2);
  for (RankPlacement& p : job.placements) {
    p.hostHash = 7;
    p.gpu = 0;
  }
  EXPECT_EQ(ranksPerGpu(job), 2);
  const MachineModel measured = jobMachine(job, MemorySide::Device, GpuSharing{1000, 0});
  EXPECT_DOUBLE_EQ(measured.intraGbs, 500);
  EXPECT_TRUE(measured.lanesInParallel);
  EXPECT_DOUBLE_EQ(measured.copyGbs, kDeviceLaneGbs);
  EXPECT_DOUBLE_EQ(jobMachine(job, MemorySide::Device).intraGbs, kGpuCopyGbsUnknown / 2);
  EXPECT_FALSE(jobMachine(job, MemorySide::Host).lanesInParallel);
  // Ranks on GPUs of their own keep the fabric's rate.
  job.placements[1].gpu = 1;
  EXPECT_EQ(ranksPerGpu(job), 1);
  EXPECT_DOUBLE_EQ(jobMachine(job, MemorySide::Device, GpuSharing{1000, 0}).intraGbs, defaultMachine(2, 0).intraGbs);
  // Unless the CUDA devices say otherwise (ranks on a GPU the host graph does not list).
  EXPECT_DOUBLE_EQ(jobMachine(job, MemorySide::Device, GpuSharing{1000, 2}).intraGbs, 500);
  job.placements[1].gpu = 0;

  Tuner tuner(measured);
  auto channelsFor = [&](uint64_t bytes) {
    TuneRequest req;
    req.coll = Collective::AllReduce;
    req.count = bytes / 4;
    req.elemSize = 4;
    req.slotBytes = 128 << 10;
    req.maxChannels = 32;
    TuneChoice choice;
    EXPECT_TRUE(tuner.choosePlan(req, &choice).ok());
    return choice.nchannels;
  };
  EXPECT_EQ(channelsFor(8), 1);
  // 1 GiB: 500 GB/s of fabric per rank takes at least 17 lanes of 30 GB/s.
  EXPECT_GE(channelsFor(uint64_t{1} << 30), 16);
}

}  // namespace
}  // namespace loom::testing

namespace loom::testing {
namespace {

// Azure NDv4: two GPUs and two NICs behind each PCIe switch, every GPU equally close to both. The GPUs
// share them out one each (as NCCL pairs them), so a job of two such hosts crosses through all 8 NICs,
// not through the first NIC of each switch.
TEST(JobTopology, GpusThatTieForNicsShareThemOut) {
  LOOM_FIXTURE_OR_SKIP(path, "nccl-azure-ndv4-topo.xml");
  const SystemGraph g = load(path);
  ASSERT_EQ(g.gpuCount(), 8);
  ASSERT_EQ(g.nicCount(), 8);
  std::set<int> nics;
  for (int gpu = 0; gpu < g.gpuCount(); ++gpu) {
    EXPECT_EQ(g.closestNics(gpu).size(), 2u) << "GPU " << gpu;
    nics.insert(g.closestNic(gpu));
  }
  EXPECT_EQ(nics.size(), 8u);
  JobTopology job;
  ASSERT_TRUE(modelJob(g, 16, 8, 0, &job).ok());
  std::set<int> entries;  // where each channel's ring enters host 1
  for (const std::vector<int>& ring : job.rings) {
    ASSERT_EQ(ring.size(), 16u);
    for (size_t i = 0; i < ring.size(); ++i)
      if (ring[i] >= 8 && ring[(i + ring.size() - 1) % ring.size()] < 8) entries.insert(ring[i]);
  }
  EXPECT_EQ(entries.size(), 8u);
}

}  // namespace
}  // namespace loom::testing
