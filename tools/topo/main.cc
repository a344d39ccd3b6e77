// loom-topo: shows the machine as Loom sees it (paths, bandwidths, rings, trees) and converts it to
// NCCL's topology XML; measures the host-memory rate the cost model uses (topology/calibration.h).
//   loom-topo [--topo FILE] [--json] [--dump-nccl-xml FILE]
//   loom-topo --calibrate FILE     (then LOOM_CALIBRATION_FILE=FILE)
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "report.h"
#include "topology/calibration.h"
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
  std::string calibrationOut;
  app.add_option("--calibrate", calibrationOut,
                 "measure host memory through a FIFO between two cores (64 MiB, 7 rounds) and write it to FILE "
                 "for LOOM_CALIBRATION_FILE, instead of showing the topology");
  CLI11_PARSE(app, argc, argv);

  if (!calibrationOut.empty()) {
    loom::Calibration calibration;
    loom::Status measured = loom::measureCalibration(size_t{64} << 20, 7, &calibration);
    if (measured.ok()) measured = loom::writeCalibrationFile(calibrationOut, calibration);
    if (!measured.ok()) return fail(measured);
    std::printf("host memory through a FIFO: %.3g GB/s, written to %s\n", calibration.copyGbs, calibrationOut.c_str());
    return 0;
  }

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
