// Topology at run time, seen through communicators: host-memory ranks standing for the GPUs of real
// machines' topology files (LOOM_TOPO_FILE), one host as threads, several "hosts" (LOOM_HOSTID) as
// forked processes. What a communicator reports (LOOM_GRAPH_DUMP_FILE) is compared with loom-topo and
// with the graph itself, its plans with loom-sim's, and every collective is checked element by element
// on the rings that result. One host as thread ranks (FixtureRings, Topology*), several hosts as process
// ranks (SeveralHosts*); tests/api/meson.build runs the two apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include <unistd.h>

#include "cases.h"
#include "harness.h"
#include "core/communicator.h"
#include "core/run/planner.h"
#include "topology/topology.h"

namespace loomtest {
namespace {

using nlohmann::json;

std::string envOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::string fixturePath(const std::string& name) {
  return envOr("LOOM_FIXTURES", "../shared/fixtures/topology") + "/" + name;
}

#define FIXTURE_OR_SKIP(var, name)                     \
  const std::string var = fixturePath(name);          \
  if (!std::filesystem::exists(var)) GTEST_SKIP() << "topology fixture " << var << " is absent (set LOOM_FIXTURES)"

// Files of this test binary (the threads and processes binaries run at once): named by the pid of the
// process that first asks, which forked ranks inherit.
std::string tempPath(const std::string& name) {
  static const std::string prefix = ::testing::TempDir() + "/loom_topology_" + std::to_string(getpid()) + "_";
  return prefix + name;
}

json readJsonFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return json();
  return json::parse(file, nullptr, /*allow_exceptions=*/false);
}

// Every communicator here: no host cache written by tests, one calibration figure for all.
struct QuietHost {
  QuietHost() : cache("LOOM_CACHE_DIR", "none"), calibration("LOOM_CALIBRATION_FILE", path().c_str()) {}
  static std::string path() {
    const std::string p = tempPath("calibration.json");
    std::ofstream(p) << R"({"copy_gbs": 6.2})" << "\n";
    return p;
  }
  ScopedEnv cache, calibration;
};

// Inits a communicator that must not come up: the result and loomGetLastError's text (one that does
// come up is destroyed, and the result is loomSuccess).
loomResult_t initThatMustFail(RankContext& ctx, std::string* message) {
  loomComm_t comm = nullptr;
  const loomResult_t r = loomCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank);
  if (r == loomSuccess) loomCommDestroy(comm);
  *message = loomGetLastError(nullptr);
  return r;
}

// A small matrix of every collective: each dtype and op appears, awkward counts, in and out of place.
std::vector<Case> everyCollective(int nranks) {
  MatrixSpec spec{.colls = {std::begin(kAllColls), std::end(kAllColls)},
                  .dtypes = {loomFloat32, loomBfloat16, loomInt32, loomUint8},
                  .counts = {1, 3, 1000, 65537},
                  .crossDtypeOp = false};
  return buildCases(spec, nranks);
}

// ---------------------------------------------------------------------------------------------------
// One host: G thread ranks on a G-GPU machine's file.

// Runs a tool and parses its standard output as JSON (null when it fails).
json toolJson(const std::string& command) {
  const std::string out = tempPath("tool.json"), err = tempPath("tool.err");
  const std::string full = command + " >" + out + " 2>" + err;
  if (std::system(full.c_str()) != 0) {
    std::ifstream errors(err);
    ADD_FAILURE() << command << " failed: " << std::string(std::istreambuf_iterator<char>(errors), {});
    return json();
  }
  return readJsonFile(out);
}

json loomTopoJson(const std::string& file) {
  return toolJson("env -u LOOM_TOPO_FILE " + envOr("LOOM_TOPO_BIN", "loom-topo") + " --topo '" + file + "' --json");
}

struct Fixture {
  const char* file;
  int gpus;
};

const Fixture kFixtures[] = {
    {"hwloc-dgx2-16xV100-nvswitch.xml", 16},  {"nccl-hgx-8xA100-nvswitch-4xcx6.xml", 8},
    {"hwloc-power8-4xP100-nvlink.xml", 4},    {"hwloc-2xP100-pcie-switch-cx5.xml", 2},
    {"nccl-azure-ndv4-topo.xml", 8},
};

// The ring's slowest hop, in path bandwidth between the GPUs its ranks stand for.
double slowestHop(const loom::SystemGraph& graph, const std::vector<int>& ring, const std::vector<int>& gpuOf) {
  double slowest = 1e300;
  for (size_t i = 0; i < ring.size() && ring.size() > 1; ++i)
    slowest = std::min(slowest, graph.gpuPath(gpuOf[static_cast<size_t>(ring[i])],
                                              gpuOf[static_cast<size_t>(ring[(i + 1) % ring.size()])]).bwGbs);
  return slowest;
}

// The best slowest hop any ring over the GPUs can have: every ring for up to 9 GPUs; beyond, a bound
// that a ring reaching it cannot beat (each GPU has two ring neighbours, so the slowest hop is at most
// every GPU's second-fastest path).
double bestSlowestHop(const loom::SystemGraph& graph) {
  const int n = graph.gpuCount();
  if (n <= 9) {
    std::vector<int> order(static_cast<size_t>(n)), identity(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::iota(identity.begin(), identity.end(), 0);
    double best = 0;
    do best = std::max(best, slowestHop(graph, order, identity));
    while (std::next_permutation(order.begin() + 1, order.end()));
    return best;
  }
  double bound = 1e300;
  for (int g = 0; g < n; ++g) {
    std::vector<double> bws;
    for (int h = 0; h < n; ++h)
      if (h != g) bws.push_back(graph.gpuPath(g, h).bwGbs);
    std::sort(bws.rbegin(), bws.rend());
    bound = std::min(bound, bws.at(1));
  }
  return bound;
}

class FixtureRings : public ::testing::TestWithParam<Fixture> {};

// The rings a communicator reports are loom-topo's for the file; each visits every rank once and its
// slowest hop is the best the graph allows; threads of one process reach each other locally and use
// no NIC.
TEST_P(FixtureRings, AreLoomToposAndTheBestTheGraphAllows) {
  FIXTURE_OR_SKIP(file, GetParam().file);
  const int n = GetParam().gpus;
  QuietHost quiet;
  const std::string dump = tempPath(std::string(GetParam().file) + ".graph.json");
  std::filesystem::remove(dump);
  ScopedEnv topoEnv("LOOM_TOPO_FILE", file.c_str());
  ScopedEnv dumpEnv("LOOM_GRAPH_DUMP_FILE", dump.c_str());
  const std::vector<Case> cases = everyCollective(n);
  RunOptions options;
  // Every collective on the rings that result (ring and tree follow them; the default picks per size).
  for (const char* algo : {"", "ring", "tree"}) {
    ScopedEnv forced("LOOM_ALGO", *algo ? algo : nullptr);
    const std::string failures =
        runRanks(Launch::Threads, n, options, [&](RankContext& ctx) { return runCases(ctx, cases); });
    EXPECT_TRUE(failures.empty()) << GetParam().file << " LOOM_ALGO=" << algo << ":\n" << failures;
  }

  const json report = readJsonFile(dump);
  ASSERT_TRUE(report.is_object()) << "no graph dump at " << dump;
  const json topo = loomTopoJson(file);
  ASSERT_TRUE(topo.is_object()) << "loom-topo --topo " << file << " --json failed";
  EXPECT_EQ(report["nranks"], n);
  EXPECT_EQ(report["rings"], topo["rings"]);

  loom::SystemGraph graph;
  ASSERT_TRUE(loom::loadTopologyFile(file, &graph).ok());
  const auto gpuOf = report["gpus"].get<std::vector<int>>();
  for (int r = 0; r < n; ++r) EXPECT_EQ(gpuOf.at(static_cast<size_t>(r)), r) << "rank " << r << "'s GPU";
  const double best = bestSlowestHop(graph);
  for (const auto& ringJson : report["rings"]) {
    auto ring = ringJson.get<std::vector<int>>();
    EXPECT_NEAR(slowestHop(graph, ring, gpuOf), best, best * 1e-6) << ringJson.dump();
    std::sort(ring.begin(), ring.end());
    std::vector<int> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(ring, all) << "a ring visits every rank once: " << ringJson.dump();
  }
  ASSERT_EQ(report["transports"].size(), static_cast<size_t>(n));
  for (int peer = 0; peer < n; ++peer) EXPECT_EQ(report["transports"][peer], peer == 0 ? "self" : "local");
  for (const auto& nic : report["nics"]) EXPECT_TRUE(nic.is_null()) << "one host needs no NIC: " << nic.dump();
}

INSTANTIATE_TEST_SUITE_P(Machines, FixtureRings, ::testing::ValuesIn(kFixtures),
                         [](const ::testing::TestParamInfo<Fixture>& info) {
                           std::string name = info.param.file;
                           name = name.substr(0, name.find(".xml"));
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// LOOM_TOPO_GPU places the host's ranks on other GPUs: 4 ranks on the HGX's GPUs 4..7 search their
// ring among those four.
TEST(TopologyGpuOverride, RanksStandForTheNamedGpus) {
  FIXTURE_OR_SKIP(file, "nccl-hgx-8xA100-nvswitch-4xcx6.xml");
  QuietHost quiet;
  const std::string dump = tempPath("override.graph.json");
  ScopedEnv topo("LOOM_TOPO_FILE", file.c_str());
  ScopedEnv dumpEnv("LOOM_GRAPH_DUMP_FILE", dump.c_str());
  ScopedEnv gpus("LOOM_TOPO_GPU", "7,6,5,4");
  const std::string failures = runRanks(Launch::Threads, 4, RunOptions{}, [](RankContext&) { return std::string(); });
  ASSERT_TRUE(failures.empty()) << failures;
  const json report = readJsonFile(dump);
  EXPECT_EQ(report["gpus"], json({7, 6, 5, 4}));
}

// The plan a communicator on a fixture chooses, for every collective over a sweep of sizes, is the
// plan loom-sim --topo predicts for that file (host memory and device memory alike).
TEST(TopologyPlans, TheCommunicatorChoosesWhatLoomSimPredicts) {
  FIXTURE_OR_SKIP(hgx, "nccl-hgx-8xA100-nvswitch-4xcx6.xml");
  FIXTURE_OR_SKIP(power8, "hwloc-power8-4xP100-nvlink.xml");
  FIXTURE_OR_SKIP(azure, "nccl-azure-ndv4-topo.xml");
  const std::string sim = envOr("LOOM_SIM_BIN", "");
  if (sim.empty()) GTEST_SKIP() << "loom-sim was not built (LOOM_SIM_BIN unset)";
  QuietHost quiet;
  struct Machine {
    std::string file;
    int ranks;
  };
  const std::pair<loom::Collective, const char*> colls[] = {
      {loom::Collective::AllReduce, "all_reduce"},         {loom::Collective::AllGather, "all_gather"},
      {loom::Collective::ReduceScatter, "reduce_scatter"}, {loom::Collective::Broadcast, "broadcast"},
      {loom::Collective::Reduce, "reduce"},                {loom::Collective::AlltoAll, "alltoall"}};
  int compared = 0;
  for (const Machine& m : {Machine{hgx, 8}, Machine{power8, 4}, Machine{azure, 8}}) {
    ScopedEnv topo("LOOM_TOPO_FILE", m.file.c_str());
    // The communicator's own view: its transports' slot and channels, its tuners.
    uint64_t slotBytes = 0;
    int channels = 0, fifoSlots = 0;
    std::map<std::string, std::vector<std::string>> chosen;  // "<coll> <memory>" -> per size
    std::map<std::string, json> predicted;
    std::string failures = runRanks(Launch::Threads, m.ranks, RunOptions{}, [&](RankContext& ctx) -> std::string {
      if (ctx.rank != 0) return "";
      slotBytes = ctx.comm->transports->slotBytes();
      channels = ctx.comm->transports->nchannels();
      fifoSlots = static_cast<int>(ctx.comm->settings.nslots);
      for (const char* memory : {"host", "device"}) {
        for (const auto& [coll, name] : colls) {
          const std::string cmd = sim + " " + name + " -n " + std::to_string(m.ranks) + " --topo '" + m.file +
                                  "' --memory " + memory + " --calibration " + QuietHost::path() +
                                  " --slot-bytes " + std::to_string(slotBytes) + " --max-channels " +
                                  std::to_string(channels) + " --fifo-slots " + std::to_string(fifoSlots) +
                                  " -b 8 -e 256M -f 4 --json";
          const json rows = toolJson(cmd);
          if (!rows.is_array() || rows.empty()) return "loom-sim gave nothing: " + cmd;
          const std::string key = std::string(name) + " " + memory;
          predicted[key] = rows;
          const bool blocks = coll == loom::Collective::AllGather || coll == loom::Collective::ReduceScatter ||
                              coll == loom::Collective::AlltoAll;
          for (const json& row : rows) {
            loom::Operation op;
            op.coll = coll;
            op.dtype = loomFloat32;
            op.count = row["bytes"].get<uint64_t>() / (4 * (blocks ? static_cast<uint64_t>(m.ranks) : 1));
            loom::Algorithm algo;
            loom::PlanRequest req;
            std::string note;
            loom::Status st = loom::chooseTunedPlan(
                ctx.comm, op, std::string(memory) == "host" ? loom::PlanFor::Host : loom::PlanFor::Device, &algo, &req,
                &note);
            if (!st.ok()) return key + ": " + st.message();
            chosen[key].push_back(std::string(loom::algorithmName(algo)) + "/" + std::to_string(req.nchannels) + "/" +
                                  std::to_string(req.chunkElems * 4));
          }
        }
      }
      return "";
    });
    ASSERT_TRUE(failures.empty()) << failures;
    for (const auto& [key, rows] : predicted) {
      std::vector<std::string> simChoices;
      for (const json& row : rows)
        simChoices.push_back(row["algorithm"].get<std::string>() + "/" + std::to_string(row["channels"].get<int>()) +
                             "/" + std::to_string(row["chunk_bytes"].get<uint64_t>()));
      EXPECT_EQ(chosen[key], simChoices) << m.file << ": " << key << " (algorithm/channels/chunk bytes per size)";
      compared += static_cast<int>(rows.size());
    }
  }
  EXPECT_GT(compared, 100);
}

// Bad topology and calibration files are clear errors naming the file, on every rank, never a crash.
TEST(TopologyErrors, BadFilesAreRefusedNamingThem) {
  QuietHost quiet;
  const std::string garbage = tempPath("garbage.xml");
  std::ofstream(garbage) << "<notatopology/>\n";
  const std::string badCalibration = tempPath("bad-calibration.json");
  std::ofstream(badCalibration) << "{\"copy_gbs\": \"fast\"}\n";
  struct BadCase {
    const char* variable;
    std::string value;
    loomResult_t expected;
  };
  const BadCase cases[] = {
      {"LOOM_TOPO_FILE", "/nonexistent/topology.xml", loomInvalidArgument},
      {"LOOM_TOPO_FILE", garbage, loomInvalidArgument},
      {"LOOM_TOPO_FILE", ::testing::TempDir(), loomInvalidArgument},  // a directory
      {"LOOM_CALIBRATION_FILE", badCalibration, loomInvalidArgument},
      {"LOOM_CALIBRATION_FILE", "/nonexistent/calibration.json", loomInvalidArgument},
      {"LOOM_TOPO_GPU", "0,x", loomInvalidArgument},
  };
  for (const BadCase& bad : cases) {
    ScopedEnv env(bad.variable, bad.value.c_str());
    const std::string failures = runRanksRaw(Launch::Threads, 3, RunOptions{}, [&](RankContext& ctx) -> std::string {
      std::string message;
      const loomResult_t r = initThatMustFail(ctx, &message);
      if (r == loomSuccess) return "init succeeded";
      if (r != bad.expected) return std::string("returned ") + loomGetErrorString(r) + ": " + message;
      if (message.find(bad.value) == std::string::npos) return "the error does not name " + bad.value + ": " + message;
      return "";
    });
    EXPECT_TRUE(failures.empty()) << bad.variable << "=" << bad.value << ":\n" << failures;
  }
}

// This machine as it is (live discovery: no GPU, perhaps no NIC hwloc can see): communicators come up
// quickly and work.
TEST(TopologyLive, ThisMachineInitialisesQuickly) {
  ScopedEnv noFile("LOOM_TOPO_FILE", nullptr);
  ScopedEnv cache("LOOM_CACHE_DIR", "none");
  const std::string dump = tempPath("live.graph.json");
  ScopedEnv dumpEnv("LOOM_GRAPH_DUMP_FILE", dump.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  const std::string failures =
      runRanks(Launch::Threads, 4, RunOptions{}, [](RankContext& ctx) { return runCases(ctx, everyCollective(4)); });
  EXPECT_TRUE(failures.empty()) << failures;
  const json report = readJsonFile(dump);
  EXPECT_EQ(report["topology"], "live");
  EXPECT_EQ(report["rings"].size() >= 1, true);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
}

// ---------------------------------------------------------------------------------------------------
// Several hosts: forked processes, each with LOOM_HOSTID naming its host and the host's topology file.

struct HostsCase {
  const char* file;
  int hosts;
  int ranksPerHost;
};

class SeveralHosts : public ::testing::TestWithParam<HostsCase> {};

// Rings cross between hosts once per host on every channel, each channel through its own NIC where the
// hosts have several, ranks reach peers on other hosts over the network and on theirs through shared
// memory, and every collective is element-for-element correct on the plans that result.
TEST_P(SeveralHosts, RingsCrossOncePerHostThroughDistinctNics) {
  FIXTURE_OR_SKIP(file, GetParam().file);
  const HostsCase hc = GetParam();
  const int n = hc.hosts * hc.ranksPerHost;
  QuietHost quiet;
  const std::string dumpPattern = tempPath("hosts_%r.graph.json");
  for (int r = 0; r < n; ++r) std::filesystem::remove(tempPath("hosts_" + std::to_string(r) + ".graph.json"));
  ScopedEnv topo("LOOM_TOPO_FILE", file.c_str());
  ScopedEnv dumpEnv("LOOM_GRAPH_DUMP_FILE", dumpPattern.c_str());
  const std::vector<Case> cases = everyCollective(n);
  for (const char* algo : {"", "ring"}) {
    ScopedEnv forced("LOOM_ALGO", *algo ? algo : nullptr);
    const std::string failures = runRanksRaw(Launch::Processes, n, RunOptions{}, [&](RankContext& ctx) -> std::string {
      const std::string host = "topology-host-" + std::to_string(ctx.rank / hc.ranksPerHost);
      setenv("LOOM_HOSTID", host.c_str(), 1);
      LT_CALL(nullptr, loomCommInitRank(&ctx.comm, ctx.nranks, ctx.id, ctx.rank));
      std::string out = runCases(ctx, cases);
      if (ctx.comm) LT_CALL(ctx.comm, loomCommDestroy(ctx.comm));
      return out;
    });
    EXPECT_TRUE(failures.empty()) << hc.hosts << " hosts x " << hc.ranksPerHost << " LOOM_ALGO=" << algo << ":\n"
                                  << failures;
  }

  loom::SystemGraph graph;
  ASSERT_TRUE(loom::loadTopologyFile(file, &graph).ok());
  const int nics = graph.nicCount();
  for (int r = 0; r < n; ++r) {
    const json report = readJsonFile(tempPath("hosts_" + std::to_string(r) + ".graph.json"));
    ASSERT_TRUE(report.is_object()) << "rank " << r << " wrote no graph dump";
    const int myHost = r / hc.ranksPerHost;
    // Transports by path: the same host through shared memory, others through the network.
    for (int peer = 0; peer < n; ++peer) {
      const std::string expected = peer == r ? "self" : peer / hc.ranksPerHost == myHost ? "shm" : "net";
      EXPECT_EQ(report["transports"][peer], expected) << "rank " << r << " -> " << peer;
    }
    EXPECT_FALSE(report["nics"][r].is_null()) << "rank " << r << " reaches other hosts through no NIC";
    if (r != 0) continue;
    const auto rings = report["rings"].get<std::vector<std::vector<int>>>();
    // channel -> host -> NIC index in that host's graph
    const auto channelNics = report["channel_nics"].get<std::vector<std::vector<int>>>();
    ASSERT_EQ(channelNics.size(), rings.size());
    ASSERT_FALSE(rings.empty());
    for (const auto& ring : rings) {
      ASSERT_EQ(ring.size(), static_cast<size_t>(n));
      int crossings = 0;
      for (size_t i = 0; i < ring.size(); ++i)
        crossings += ring[i] / hc.ranksPerHost != ring[(i + 1) % ring.size()] / hc.ranksPerHost;
      EXPECT_EQ(crossings, hc.hosts) << "a ring crosses between hosts once per host: " << json(ring).dump();
      std::vector<int> sorted = ring;
      std::sort(sorted.begin(), sorted.end());
      for (int i = 0; i < n; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
    }
    // Each host has a channel per NIC at least, and its first channels go through a NIC each.
    EXPECT_GE(channelNics.size(), static_cast<size_t>(nics));
    const size_t distinct = std::min(channelNics.size(), static_cast<size_t>(nics));
    for (int h = 0; h < hc.hosts; ++h) {
      std::set<int> used;
      for (size_t c = 0; c < distinct; ++c) used.insert(channelNics[c].at(static_cast<size_t>(h)));
      EXPECT_EQ(used.size(), distinct) << "host " << h << ": " << report["channel_nics"].dump();
      EXPECT_EQ(used.count(-1), 0u) << "host " << h << ": " << report["channel_nics"].dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Machines, SeveralHosts,
                         ::testing::Values(HostsCase{"nccl-hgx-8xA100-nvswitch-4xcx6.xml", 2, 4},
                                           HostsCase{"nccl-hgx-8xA100-nvswitch-4xcx6.xml", 4, 2},
                                           HostsCase{"hwloc-2xP100-pcie-switch-cx5.xml", 2, 2}),
                         [](const ::testing::TestParamInfo<HostsCase>& info) {
                           return std::string(info.param.file[0] == 'n' ? "hgx" : "p100") + "_" +
                                  std::to_string(info.param.hosts) + "x" + std::to_string(info.param.ranksPerHost);
                         });

// One rank whose topology file is bad fails naming the file; every other rank's init fails too (an
// error, not a hang). Ranks of one host that read different files are refused on every rank.
TEST(SeveralHostsErrors, ABadFileOnOneRankFailsEveryRank) {
  FIXTURE_OR_SKIP(hgx, "nccl-hgx-8xA100-nvswitch-4xcx6.xml");
  FIXTURE_OR_SKIP(power8, "hwloc-power8-4xP100-nvlink.xml");
  QuietHost quiet;
  struct Mix {
    std::string rank1File;
    const char* rank1Names;  // what rank 1's error must name
    const char* othersName;  // what every other rank's error must name
  };
  for (const Mix& mix : {Mix{"/nonexistent/topology.xml", "/nonexistent/topology.xml", "rank 1"},
                         Mix{power8, "topology", "topology"}}) {
    const std::string failures = runRanksRaw(Launch::Processes, 3, RunOptions{}, [&](RankContext& ctx) -> std::string {
      setenv("LOOM_TOPO_FILE", ctx.rank == 1 ? mix.rank1File.c_str() : hgx.c_str(), 1);
      std::string message;
      const loomResult_t r = initThatMustFail(ctx, &message);
      if (r == loomSuccess) return "init succeeded";
      const char* named = ctx.rank == 1 ? mix.rank1Names : mix.othersName;
      if (message.find(named) == std::string::npos)
        return std::string(loomGetErrorString(r)) + " without naming '" + named + "': " + message;
      return "";
    });
    EXPECT_TRUE(failures.empty()) << "rank 1 LOOM_TOPO_FILE=" << mix.rank1File << ":\n" << failures;
  }
}


}  // namespace
}  // namespace loomtest

#undef FIXTURE_OR_SKIP  // unity builds: the sources compiled after this one do not see it
