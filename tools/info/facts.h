// What loom-info reports, gathered once into one JSON document (`--json` prints it; the text view is
// made from it, so the two never disagree): the build, CUDA, this host's topology, the algorithms
// (LOOM_ALGO's registry) and network providers (LOOM_NET's table) this build has, the network provider
// Loom would choose and why, rings for N ranks of this host, the calibration in use, every setting and
// the settings files.
// Nothing here needs a GPU or a network: each part that cannot be found says why instead.
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace loom::info_tool {

struct Request {
  int ranks = 0;          // local ranks to show rings for (0: the topology's GPUs, else 2)
  bool network = true;    // ask the network providers (plugins, ib, ucx, socket)
};

// Fails only when the topology cannot be read (a LOOM_TOPO_FILE that is missing or malformed):
// what loom-info is asked for first is what a communicator would be built on.
Status gatherFacts(const Request& request, nlohmann::ordered_json* out);

// Every setting: name, value, default, source, kind, allowed, subsystem, meaning, NCCL's name.
nlohmann::ordered_json settingsFacts();

// The settings files looked for, in precedence order (base/settings_files.h): path, the names it holds,
// the variable that named it, whether it was found, how many values it gives, the error reading it.
nlohmann::ordered_json settingsFilesFacts();

}  // namespace loom::info_tool
