// loom-topo: shows the machine as Loom sees it (paths, bandwidths, rings, trees) and converts it to
// NCCL's topology XML.
//   loom-topo [--topo FILE] [--json] [--dump-nccl-xml FILE]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "report.h"
#include "topology/topology.h"

namespace {

int fail(const loom::Status& status) {
  std::fprintf(stderr, "loom-topo: %s\n", status.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Show this machine's (or a file's) topology as Loom sees it: path classes, bandwidths, "
               "rings and trees."};
  std::string topoFile, ncclXmlOut;
  bool json = false;
  app.add_option("--topo", topoFile, "hwloc v2 XML or NCCL topology XML to read instead of this machine "
                                     "(default: LOOM_TOPO_FILE, else live discovery)");
  app.add_flag("--json", json, "print JSON (gpus, nics, paths, rings, trees) instead of tables");
  app.add_option("--dump-nccl-xml", ncclXmlOut, "also write the topology as NCCL topology XML to FILE");
  CLI11_PARSE(app, argc, argv);

  loom::SystemGraph graph;
  loom::Status status = topoFile.empty() ? loom::loadSystemTopology(&graph) : loom::loadTopologyFile(topoFile, &graph);
  if (!status.ok()) return fail(status);
  loom::GpuChannels channels;
  status = loom::searchChannels(graph, {}, &channels);
  if (!status.ok()) return fail(status);

  if (!ncclXmlOut.empty()) {
    std::string xml;
    status = loom::writeNcclXml(graph, &xml);
    if (!status.ok()) return fail(status);
    std::ofstream file(ncclXmlOut);
    if (!(file << xml) || !file.flush()) return fail(loom::invalidArgument("cannot write {}", ncclXmlOut));
  }
  if (json) {
    std::cout << loom::topo_tool::renderJson(graph, channels).dump(2) << "\n";
  } else {
    std::cout << loom::topo_tool::renderText(graph, channels);
  }
  return 0;
}
