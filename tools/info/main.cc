// loom-info: what this Loom was built with, what it finds on this machine and what it would do here,
// as `ucx_info` and `ompi_info` say it for theirs. Needs no GPU and no network.
//   loom-info [--ranks N] [--json] [--no-network]
//   loom-info --settings [--json]
// Exit status 1 when the topology cannot be read (a LOOM_TOPO_FILE that is missing or malformed), or
// when Loom's settings files have a bad line (each is named on stderr, after the report).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "base/settings.h"
#include "facts.h"
#include "render.h"

namespace {

// Each bad line of Loom's settings files, on stderr (a communicator would not start): exit status 1.
int reportSettingsFileProblems() {
  const std::vector<std::string> problems = loom::settingsFileProblems();
  std::cout.flush();  // after the report, also where both go to one pipe
  for (const std::string& problem : problems) std::fprintf(stderr, "loom-info: %s\n", problem.c_str());
  return problems.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Show what this Loom was built with, what it finds on this machine (GPUs, NICs, NUMA nodes, "
               "topology) and what it would do here (rings, network provider, calibration, settings)."};
  loom::info_tool::Request request;
  bool json = false, settingsOnly = false, noNetwork = false;
  app.add_option("--ranks", request.ranks, "show rings for this many ranks of this host (default: one per GPU of "
                                           "the topology, else 2)")
      ->check(CLI::Range(1, 4096));
  app.add_flag("--json", json, "print JSON instead of text");
  app.add_flag("--settings", settingsOnly, "list every LOOM_* setting with its value, default and source");
  app.add_flag("--no-network", noNetwork, "do not ask the network providers (plugins, ib, ucx) which would serve");
  CLI11_PARSE(app, argc, argv);
  request.network = !noNetwork;

  if (settingsOnly) {
    const nlohmann::ordered_json settings = loom::info_tool::settingsFacts();
    std::cout << (json ? settings.dump(2) + "\n"
                       : loom::info_tool::renderSettings(settings, loom::info_tool::settingsFilesFacts()));
    return reportSettingsFileProblems();
  }
  nlohmann::ordered_json facts;
  const loom::Status gathered = loom::info_tool::gatherFacts(request, &facts);
  if (!gathered.ok()) {
    std::fprintf(stderr, "loom-info: %s\n", gathered.message().c_str());
    return 1;
  }
  std::cout << (json ? facts.dump(2) + "\n" : loom::info_tool::renderFacts(facts));
  return reportSettingsFileProblems();
}
