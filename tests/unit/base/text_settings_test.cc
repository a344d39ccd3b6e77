// Text settings (paths, addresses, names): their invalid values are invalid only where they are used,
// so each has a case here that runs the public API in a child process (a gtest death test, so that no
// cache of this process keeps a value) with a bad value, and checks the outcome the table promises:
// an Error setting fails with a message naming it, a Fallback one goes on and logs a warning naming
// it. A text setting without a case (or a stated reason) fails the test.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "base/settings.h"
#include "loom.h"

namespace loom {
namespace {

enum class Action { UniqueId, OneRank, TwoRanksOverNet };

struct TextCase {
  std::string value;                                    // the bad value
  std::vector<std::pair<std::string, std::string>> env;  // what else the case needs
  Action action;
  std::string expected;  // a regular expression the child's stderr must match
};

// Runs in the child: the action, then its result as the exit code and loomGetLastError on stderr.
[[noreturn]] void runCase(const char* name, const TextCase& c) {
  setenv("LOOM_DEBUG", "WARN", 1);
  setenv(name, c.value.c_str(), 1);
  for (const auto& [k, v] : c.env) setenv(k.c_str(), v.c_str(), 1);
  loomResult_t rc = loomSuccess;
  loomUniqueId id;
  if (c.action == Action::UniqueId) {
    rc = loomGetUniqueId(&id);
  } else if (c.action == Action::OneRank) {
    loomComm_t comm = nullptr;
    rc = loomGetUniqueId(&id);
    if (rc == loomSuccess) rc = loomCommInitRank(&comm, 1, id, 0);
    float x = 1, y = 0;
    if (rc == loomSuccess) rc = loomAllReduce(&x, &y, 1, loomFloat32, loomSum, comm, nullptr);
    if (comm) loomCommDestroy(comm);
  } else {
    loomComm_t comms[2] = {nullptr, nullptr};
    rc = loomCommInitAll(comms, 2, nullptr);
    for (loomComm_t comm : comms)
      if (comm) loomCommDestroy(comm);
  }
  std::fprintf(stderr, "result %d: %s\n", static_cast<int>(rc), loomGetLastError(nullptr));
  std::fflush(stderr);
  std::_Exit(static_cast<int>(rc));
}

std::string nowhere(const char* file) { return std::string("/nonexistent-loom-dir/") + file; }

// Every text setting: a bad value and its outcome, or why it has none.
std::map<std::string, TextCase> cases() {
  std::map<std::string, TextCase> c;
  c["LOOM_CONF_FILE"] = {nowhere("loom.conf"), {}, Action::OneRank,
                         "LOOM_CONF_FILE=/nonexistent-loom-dir/loom.conf: no such file"};
  c["LOOM_COMM_ID"] = {"no-port-here", {}, Action::UniqueId, "LOOM_COMM_ID"};
  c["LOOM_TRACE_FILE"] = {nowhere("trace.json"), {}, Action::OneRank, "LOOM_TRACE_FILE: cannot write"};
  c["LOOM_GRAPH_DUMP_FILE"] = {nowhere("graph.json"), {}, Action::OneRank, "cannot write LOOM_GRAPH_DUMP_FILE="};
  c["LOOM_TOPO_DUMP_FILE"] = {nowhere("topo.xml"), {}, Action::OneRank, "cannot write LOOM_TOPO_DUMP_FILE="};
  c["LOOM_TOPO_FILE"] = {nowhere("topo.xml"), {}, Action::OneRank, "/nonexistent-loom-dir/topo.xml"};
  c["LOOM_TOPO_GPU"] = {"first", {}, Action::OneRank, "LOOM_TOPO_GPU=first"};
  c["LOOM_CALIBRATION_FILE"] = {nowhere("calibration.json"), {}, Action::OneRank, "/nonexistent-loom-dir/calibration.json"};
  c["LOOM_CACHE_DIR"] = {"/proc/loom-cache", {}, Action::OneRank, "LOOM_CACHE_DIR=/proc/loom-cache"};
  c["LOOM_SOCKET_IFNAME"] = {"=loom-no-such-if0", {}, Action::UniqueId, "LOOM_SOCKET_IFNAME"};
  c["LOOM_NET"] = {"no-such-provider", {{"LOOM_TRANSPORT", "net"}}, Action::TwoRanksOverNet, "LOOM_NET=no-such-provider"};
  c["LOOM_NET_PLUGIN"] = {nowhere("libnccl-net-x.so"), {{"LOOM_TRANSPORT", "net"}}, Action::TwoRanksOverNet,
                          "/nonexistent-loom-dir/libnccl-net-x.so"};
  c["LOOM_IBVERBS_LIB"] = {nowhere("libibverbs.so.1"), {{"LOOM_TRANSPORT", "net"}, {"LOOM_NET", "ib"}},
                           Action::TwoRanksOverNet, "/nonexistent-loom-dir/libibverbs.so.1"};
  c["LOOM_DOCTOR_DIR"] = {"/proc/loom-doctor", {}, Action::OneRank, "LOOM_DOCTOR_DIR=/proc/loom-doctor: .*using .* instead"};
  c["LOOM_ALGO"] = {"allreduce:0-64K:oneshtt", {}, Action::OneRank, "LOOM_ALGO=allreduce:0-64K:oneshtt: .*'oneshtt'"};
  c["LOOM_DEBUG_SUBSYS"] = {"init,no-such-subsystem", {}, Action::OneRank, "LOOM_DEBUG_SUBSYS.*no-such-subsystem"};
  if (const char* fake = std::getenv("LOOM_TEST_FAKE_VERBS"))
    c["LOOM_IB_HCA"] = {"=no_such_hca", {{"LOOM_TRANSPORT", "net"}, {"LOOM_NET", "ib"}, {"LOOM_IBVERBS_LIB", fake},
                                          {"LOOM_FAKE_VERBS_DEVICES", "mlx5_0:active:ib"}},
                        Action::TwoRanksOverNet, "LOOM_IB_HCA"};
  return c;
}

// Text settings with no invalid value here, and why.
const std::map<std::string, std::string>& noCase() {
  static const std::map<std::string, std::string> reasons = {
      {"LOOM_HOSTID", "any text names a host"},
      {"LOOM_PERF_ID_FILE", "read by loom-perf under mpiexec (tests/perf)"},
      {"LOOM_LIBRARY", "read by the Python package (tests/python/test_settings.py)"},
      {"LOOM_FIXTURES", "read by tests and examples: a directory without the files makes those tests skip, saying so"},
  };
  return reasons;
}

// Which outcome the table promises: an error for Error settings, success and a warning for Fallback.
bool failsFor(const SettingSpec& spec) { return spec.onInvalid == OnInvalid::Error; }

TEST(TextSettings, EveryOneHasACase) {
  const auto all = cases();
  for (const SettingSpec& spec : allSettings()) {
    if (spec.kind != SettingKind::Text) continue;
    const bool hasCase = all.count(spec.name) || noCase().count(spec.name);
    const bool ibWithoutFake = std::string(spec.name) == "LOOM_IB_HCA" && !std::getenv("LOOM_TEST_FAKE_VERBS");
    EXPECT_TRUE(hasCase || ibWithoutFake) << spec.name << " has no bad-value case";
  }
}

class TextSetting : public ::testing::TestWithParam<const char*> {};

TEST_P(TextSetting, BadValue) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto all = cases();
  const auto found = all.find(GetParam());
  if (found == all.end()) GTEST_SKIP() << GetParam() << ": no case in this build (FakeVerbs needs libibverbs headers)";
  const SettingSpec* spec = findSetting(GetParam());
  ASSERT_NE(spec, nullptr);
  if (failsFor(*spec)) {
    EXPECT_EXIT(runCase(spec->name, found->second), [](int status) { return WIFEXITED(status) && WEXITSTATUS(status) != 0; },
                found->second.expected);
  } else {
    EXPECT_EXIT(runCase(spec->name, found->second), ::testing::ExitedWithCode(0), found->second.expected);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, TextSetting,
                         ::testing::Values("LOOM_CONF_FILE", "LOOM_COMM_ID", "LOOM_TRACE_FILE",
                                           "LOOM_GRAPH_DUMP_FILE", "LOOM_TOPO_DUMP_FILE", "LOOM_TOPO_FILE", "LOOM_TOPO_GPU",
                                           "LOOM_CALIBRATION_FILE", "LOOM_CACHE_DIR", "LOOM_SOCKET_IFNAME", "LOOM_NET",
                                           "LOOM_NET_PLUGIN", "LOOM_IBVERBS_LIB", "LOOM_DEBUG_SUBSYS", "LOOM_IB_HCA",
                                           "LOOM_ALGO"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param).substr(5); });

}  // namespace
}  // namespace loom
