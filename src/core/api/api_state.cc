// C API: a communicator's state for a person or a tool (loomCommDumpState), and the job-wide hang
// report made from every rank's state (loomHangReport; core/observe/hang_report.h).
#include <cstring>
#include <string>
#include <vector>

#include "core/api/api_result.h"
#include "core/communicator.h"
#include "core/observe/hang_report.h"
#include "core/observe/state_exchange.h"

using namespace loom;

namespace {

// Copies `text` with its NUL into buffer when *bytes allows; *bytes becomes what it needs.
Status copyTextOut(const std::string& text, char* buffer, size_t* bytes, const char* call) {
  const size_t needed = text.size() + 1;
  const size_t room = *bytes;
  *bytes = needed;
  if (!buffer || room < needed)
    return invalidArgument("{}: the text needs {} bytes, the buffer has {} (*bytes now says how many)", call, needed,
                           buffer ? room : 0);
  std::memcpy(buffer, text.c_str(), needed);
  return Status::Ok();
}

}  // namespace

extern "C" {

LOOM_API loomResult_t loomCommDumpState(loomComm_t comm, char* buffer, size_t* bytes) {
  return apiCall(comm, [&]() -> Status {
    if (!comm || !bytes) return invalidArgument("loomCommDumpState: NULL argument");
    // No lock the operation path holds: this answers while the rank is wedged in an operation.
    return copyTextOut(commStateJson(*comm), buffer, bytes, "loomCommDumpState");
  });
}

LOOM_API loomResult_t loomHangReport(const char* const* states, int nstates, int format, char* buffer, size_t* bytes) {
  return apiCall(nullptr, [&]() -> Status {
    if (!states || nstates < 1 || !bytes) return invalidArgument("loomHangReport: no states, or bytes is NULL");
    if (format != LOOM_REPORT_TEXT && format != LOOM_REPORT_JSON)
      return invalidArgument("loomHangReport: format {} is neither LOOM_REPORT_TEXT nor LOOM_REPORT_JSON", format);
    std::vector<std::string> all;
    for (int r = 0; r < nstates; ++r) all.emplace_back(states[r] ? states[r] : "");
    std::string text, json;
    LOOM_TRY(analyzeHang(all, &text, &json));
    return copyTextOut(format == LOOM_REPORT_JSON ? json : text, buffer, bytes, "loomHangReport");
  });
}

}  // extern "C"
