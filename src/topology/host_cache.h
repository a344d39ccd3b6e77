// What a host costs to find out, kept between processes: its discovered graph (hwloc takes ~8 ms) and
// its host-memory calibration (~20 ms, and noisy enough that two processes could otherwise tune
// differently). One file each per host identity (host name + boot id, so a reboot or another machine
// never reads a stale one), in LOOM_CACHE_DIR, else $XDG_CACHE_HOME/loom, else ~/.cache/loom;
// LOOM_CACHE_DIR=none keeps nothing. A cache that cannot be read or written is ignored: the value is
// then found out again, never wrong.
#pragma once

#include <optional>
#include <string>

#include "base/tools_api.h"
#include "topology/calibration.h"
#include "topology/graph.h"

namespace loom {

// The folder, or "" when caching is off or no folder can be named.
LOOM_TOOLS_API std::string hostCacheDir();

// This host's graph as cached (parsed with source "live"), or nullopt.
bool readCachedHostGraph(SystemGraph* graph);
void writeCachedHostGraph(const SystemGraph& graph);

std::optional<Calibration> readCachedCalibration();
void writeCachedCalibration(const Calibration& calibration);

}  // namespace loom
