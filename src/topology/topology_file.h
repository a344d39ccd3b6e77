// Loading a machine description instead of discovering this one: hwloc v1/v2 XML or NCCL topology XML,
// told apart by the root element. Anything else (hwloc 3.0 XML, other XML, non-XML, truncated files)
// is refused with loomInvalidArgument and a message that says why.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "base/tools_api.h"
#include "topology/graph.h"

namespace loom {

enum class TopologyFormat { HwlocXml, NcclXml };
const char* topologyFormatName(TopologyFormat format);

// Parses a document held in memory into an empty graph and finalizes it. `sourceName` names it in
// messages and in graph->source.
Status parseTopologyXml(const std::string& xml, const std::string& sourceName, SystemGraph* graph,
                        TopologyFormat* format = nullptr);

// Reads and parses a file into an empty graph and finalizes it.
LOOM_TOOLS_API Status loadTopologyFile(const std::string& path, SystemGraph* graph);

// This host's topology as the rest of Loom should see it: the file named by LOOM_TOPO_FILE when set,
// else live discovery.
LOOM_TOOLS_API Status loadSystemTopology(SystemGraph* graph);

// The same, loaded once per process (per LOOM_TOPO_FILE value) and shared: every communicator's init
// needs it, and discovery costs milliseconds. A discovered graph is kept in the host cache
// (host_cache.h) and used as the cache holds it (NCCL XML), so that every process of a host, whether
// it discovered or read it, has the same.
LOOM_TOOLS_API Status hostTopology(std::shared_ptr<const SystemGraph>* out);

}  // namespace loom
