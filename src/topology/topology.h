// The topology layer's interface for the rest of Loom (core, tuner, tools). Typical use at init:
//
//   SystemGraph graph;
//   LOOM_TRY(loadSystemTopology(&graph));          // LOOM_TOPO_FILE or live hwloc + NVML
//   GpuChannels channels;
//   LOOM_TRY(searchChannels(graph, {}, &channels));  // rings/trees as GPU index orderings
//   std::string view;
//   LOOM_TRY(writeNcclXml(graph, &view));           // this host's view, to exchange with other ranks
//   std::string host = localHostIdentity().key();   // group ranks into nodes with groupRanksByHost
#pragma once

#include "topology/discovery.h"
#include "topology/graph.h"
#include "base/process_identity.h"
#include "topology/nccl_xml.h"
#include "topology/search.h"
#include "topology/topology_file.h"
