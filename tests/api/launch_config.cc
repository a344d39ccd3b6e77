#include "launch_config.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace loomtest {

Launch testLaunch() {
  static const Launch launch = [] {
    const char* v = std::getenv("LOOM_TEST_LAUNCH");
    return v && std::strcmp(v, "processes") == 0 ? Launch::Processes : Launch::Threads;
  }();
  return launch;
}

int maxRanks(Launch launch) { return launch == Launch::Processes ? 5 : 8; }

std::vector<int> rankCounts(int most) {
  const char* v = std::getenv("LOOM_TEST_RANKS");
  const std::string wanted = v && *v ? v : "1,2,3,4,5,8";
  std::vector<int> counts;
  if (wanted == "all") {
    for (int n = 1; n <= most; ++n) counts.push_back(n);
    return counts;
  }
  std::stringstream list(wanted);
  for (std::string item; std::getline(list, item, ',');) {
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < 1) throw std::invalid_argument("LOOM_TEST_RANKS=" + wanted + ": not all, nor a list of rank counts");
    if (n <= most) counts.push_back(static_cast<int>(n));
  }
  return counts;
}

}  // namespace loomtest
