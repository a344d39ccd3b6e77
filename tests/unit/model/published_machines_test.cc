// The model against published machines (docs/PERFORMANCE.md, "The model against published machines"):
// NCCL's nccl-tests figures on HGX A100 and Azure NDv4 nodes, which Loom's model of the same machines
// must reproduce within 15%, through the public API (include/loom_model.h) and through loom-sim's
// command line as the table quotes it. Needs the topology fixtures (LOOM_FIXTURES); skips without them.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "loom_model.h"

namespace {

constexpr const char* kHgx = "nccl-hgx-8xA100-nvswitch-4xcx6.xml";
constexpr const char* kNdv4 = "nccl-azure-ndv4-topo.xml";

struct Published {
  const char* name;
  const char* file;
  double nvswitchGbs;    // the NVSwitch the file leaves out (NCCL reads NVLink from NVML)
  const char* machine;   // what else the file does not say (the NICs' rate)
  int ranks;
  size_t bytes;
  bool latency;          // the figure is microseconds (else busbw GB/s)
  double figure;
  const char* source;
};

// All-reduce, float, in place, as nccl-tests reports it.
const Published kPublished[] = {
    {"HgxA100_8Gpus_1GiB", kHgx, 0, "", 8, 1ull << 30, false, 230.0, "NVIDIA/nccl-tests issues (the fixtures README)"},
    {"NDv4_8Gpus_1GiB", kNdv4, 240, "nic_gbs=25", 8, 1ull << 30, false, 231.45, "MSCCL++ performance-ndmv4"},
    {"NDv4_16Gpus_1GiB", kNdv4, 240, "nic_gbs=25", 16, 1ull << 30, false, 183.82, "MSCCL++ performance-ndmv4"},
    {"NDv4_16Gpus_4GiB", kNdv4, 240, "nic_gbs=25", 16, 4ull << 30, false, 188.18, "MSCCL++ performance-ndmv4"},
    {"NDv4_8Gpus_1KiB", kNdv4, 240, "nic_gbs=25", 8, 1024, true, 16.96, "MSCCL++ performance-ndmv4"},
    {"NDv4_16Gpus_1KiB", kNdv4, 240, "nic_gbs=25", 16, 1024, true, 35.85, "MSCCL++ performance-ndmv4"},
};

std::string fixture(const char* file) {
  const char* dir = std::getenv("LOOM_FIXTURES");
  if (dir == nullptr) return "";
  const std::string path = std::string(dir) + "/" + file;
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  std::fclose(f);
  return path;
}

class PublishedMachine : public ::testing::TestWithParam<Published> {};

TEST_P(PublishedMachine, ModelWithinFifteenPercent) {
  const Published& p = GetParam();
  const std::string file = fixture(p.file);
  if (file.empty()) GTEST_SKIP() << p.file << " not found (LOOM_FIXTURES)";
  loomModelConfig_t config = LOOM_MODEL_CONFIG_INITIALIZER;
  config.world = p.ranks;
  config.topology = file.c_str();
  config.memory = loomModelMemoryDevice;
  config.nvswitchGbs = p.nvswitchGbs;
  config.machine = p.machine;
  loomModel_t model = nullptr;
  ASSERT_EQ(loomModelCreate(&config, &model), loomSuccess) << loomGetLastError(nullptr);
  loomModelRequest_t req = LOOM_MODEL_REQUEST_INITIALIZER;
  req.bytes = p.bytes;
  loomModelPrediction_t out;
  ASSERT_EQ(loomModelPredict(model, &req, &out), loomSuccess) << loomGetLastError(nullptr);
  loomModelDestroy(model);
  const double got = p.latency ? out.timeUs : out.busbwGbs;
  EXPECT_NEAR(got, p.figure, 0.15 * p.figure)
      << p.name << ": model " << got << (p.latency ? " us" : " GB/s") << " (" << out.algorithm << ", " << out.channels
      << " channels) against " << p.figure << " published (" << p.source << ")";

  // loom-sim, as docs/PERFORMANCE.md quotes the command: the same number.
  const char* sim = std::getenv("LOOM_SIM_BIN");
  if (sim == nullptr) return;
  std::string cmd = std::string(sim) + " all_reduce --ranks " + std::to_string(p.ranks) + " --topo " + file +
                    " -b " + std::to_string(p.bytes) + " --json";
  if (p.nvswitchGbs > 0) cmd += " --nvswitch-gbs " + std::to_string(p.nvswitchGbs);
  if (std::string(p.machine) == "nic_gbs=25") cmd += " --nic-gbs 25";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << cmd << "\n" << text;
  const std::string key = p.latency ? "\"time_us\":" : "\"busbw_gbs\":";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::strtod(text.c_str() + at + key.size(), nullptr), got, 1e-6 * got) << cmd;
}

INSTANTIATE_TEST_SUITE_P(Model, PublishedMachine, ::testing::ValuesIn(kPublished),
                         [](const ::testing::TestParamInfo<Published>& info) { return std::string(info.param.name); });

}  // namespace
