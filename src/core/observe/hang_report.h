// The job-wide hang report: every reachable rank's state (core/observe/comm_state.h: its flight
// record) lined up by operation number. It names the oldest operation not finished on every rank, the
// ranks that never entered it (the ones the others wait for), the ranks waiting in it, ranks whose
// operation at that number differs (another collective, count, datatype or root: a mismatch that
// hangs), the errors ranks recorded, and the ranks whose state could not be read.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "core/observe/comm_state.h"

namespace loom {

struct HangReport {
  std::string text;  // for a person
  // For tools: {"ranks", "unreachable", "oldest_unfinished": {"seq", "op", "entered", "never_entered",
  // "waiting", "waiting_on", "mismatched": [{"rank", "op"}]} or null, "failures": [{"rank", "error"}]}.
  nlohmann::ordered_json json;
};

// states[r]: rank r's state, or none when rank r could not be reached.
HangReport analyzeHang(const std::vector<std::optional<CommState>>& states);

// loomHangReport's: states[r] is rank r's loomCommDumpState JSON, or "" when rank r could not be
// reached. Fails on a state that is not such JSON, naming the rank.
Status analyzeHang(const std::vector<std::string>& states, std::string* text, std::string* json);

}  // namespace loom
