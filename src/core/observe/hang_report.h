// The job-wide hang report: every reachable rank's state (loomCommDumpState's JSON: its flight record,
// core/observe/flight_record.h) lined up by operation number. It names the oldest operation not finished on
// every rank, the ranks that never entered it (the ones the others wait for), the ranks waiting in it,
// ranks whose operation at that number differs (another collective, count, datatype or root: a
// mismatch that hangs), the errors ranks recorded, and the ranks whose state could not be read.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace loom {

// states[r]: rank r's loomCommDumpState JSON, or "" when rank r could not be reached. *text is for a
// person; *json for tools ({"ranks", "unreachable", "oldest_unfinished": {"seq", "op", "entered",
// "never_entered", "waiting", "mismatched": [{"rank", "op"}]} or null, "failures": [{"rank",
// "error"}]}). Fails on a state that is not such JSON, naming the rank.
Status analyzeHang(const std::vector<std::string>& states, std::string* text, std::string* json);

}  // namespace loom
