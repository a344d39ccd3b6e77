// loom-topo's two renderings of a system graph and its channels: a table in the style of
// `nvidia-smi topo -m`, and JSON for scripts.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "topology/graph.h"
#include "topology/search.h"

namespace loom::topo_tool {

std::string renderText(const SystemGraph& graph, const GpuChannels& channels);
nlohmann::ordered_json renderJson(const SystemGraph& graph, const GpuChannels& channels);

}  // namespace loom::topo_tool
