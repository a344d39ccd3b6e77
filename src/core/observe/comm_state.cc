#include "core/observe/comm_state.h"

#include <nlohmann/json.hpp>

namespace loom {

void to_json(nlohmann::ordered_json& j, const CommStateEntry& entry) {
  j = {{"age_us", entry.ageUs}, {"count", entry.count}, {"dtype", entry.dtype},
       {"op", entry.op},        {"peer", entry.peer},   {"seq", entry.seq}};
}

void from_json(const nlohmann::ordered_json& j, CommStateEntry& entry) {
  entry.seq = j.at("seq").get<uint64_t>();
  entry.op = j.at("op").get<std::string>();
  entry.count = j.at("count").get<uint64_t>();
  entry.dtype = j.at("dtype").get<std::string>();
  entry.peer = j.at("peer").get<int>();
  entry.ageUs = j.value("age_us", int64_t{0});
}

void to_json(nlohmann::ordered_json& j, const CommState& state) {
  j = {{"comm", state.comm},
       {"rank", state.rank},
       {"nranks", state.nranks},
       {"host", state.host},
       {"pid", state.pid},
       {"completed_up_to", state.completedUpTo},
       {"entries", state.entries},
       {"failure", state.failure},
       {"last_issued", state.lastIssued},
       {"timed_out", state.timedOut},
       {"waiting_on", state.waitingOn},
       {"connections",
        {{"local_peers", state.connections.localPeers},
         {"shm_peers", state.connections.shmPeers},
         {"net_peers", state.connections.netPeers},
         {"net_connections", state.connections.netConnections},
         {"memory_connections", state.connections.memoryConnections}}}};
}

void from_json(const nlohmann::ordered_json& j, CommState& state) {
  state.lastIssued = j.at("last_issued").get<uint64_t>();
  state.completedUpTo = j.at("completed_up_to").get<uint64_t>();
  state.entries = j.at("entries").get<std::vector<CommStateEntry>>();
  state.comm = j.value("comm", "");
  state.rank = j.value("rank", 0);
  state.nranks = j.value("nranks", 1);
  state.host = j.value("host", "");
  state.pid = j.value("pid", 0);
  state.waitingOn = j.value("waiting_on", -1);
  state.timedOut = j.value("timed_out", false);
  state.failure = j.value("failure", "");
  if (j.contains("connections") && j["connections"].is_object()) {
    const nlohmann::ordered_json& c = j["connections"];
    state.connections.localPeers = c.value("local_peers", 0);
    state.connections.shmPeers = c.value("shm_peers", 0);
    state.connections.netPeers = c.value("net_peers", 0);
    state.connections.netConnections = c.value("net_connections", 0);
    state.connections.memoryConnections = c.value("memory_connections", 0);
  }
}

std::string commStateText(const CommState& state) { return nlohmann::ordered_json(state).dump(); }

Status parseCommState(const std::string& text, CommState* out) {
  try {
    *out = nlohmann::ordered_json::parse(text).get<CommState>();
  } catch (const std::exception& e) {
    return invalidArgument("not loomCommDumpState's JSON: {}", e.what());
  }
  return Status::Ok();
}

}  // namespace loom
