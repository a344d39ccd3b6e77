// Where the topology tests find their files: real machines under LOOM_FIXTURES (skipped when absent),
// files made for these tests under LOOM_TOPO_TEST_DATA, the built loom-topo under LOOM_TOPO_BIN.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "topology/topology.h"

namespace loom::testing {

inline std::string envOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

inline std::string fixturePath(const std::string& name) {
  return envOr("LOOM_FIXTURES", "../shared/fixtures/topology") + "/" + name;
}

inline std::string dataPath(const std::string& name) { return envOr("LOOM_TOPO_TEST_DATA", "data") + "/" + name; }

// A file in the test's temporary directory holding `text`.
inline std::string writeTempFile(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/loom_topo_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

inline std::string readFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

}  // namespace loom::testing

// Declares `var` as the fixture's path, or skips the test with a message when the file is absent.
#define LOOM_FIXTURE_OR_SKIP(var, name)                                                     \
  const std::string var = ::loom::testing::fixturePath(name);                              \
  if (!std::filesystem::exists(var)) GTEST_SKIP() << "topology fixture " << var << " is absent (set LOOM_FIXTURES)"
