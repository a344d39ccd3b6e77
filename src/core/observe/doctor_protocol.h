// What loom-doctor (tools/doctor) and a process's state service (core/observe/state_service.h) say to
// each other, and where, in one place for both ends. Each process with a communicator listens on
// <doctorDirectory()>/<pid>.sock; a connection carries one request line and one answer line, both
// JSON, then closes:
//   {"request": "list"}              -> {"pid", "comms": [a state without "entries", with "job"...]}
//   {"request": "report", "job": KEY} -> reportAnswer: the job's hang report, gathered from every rank
//   either, when it cannot be answered -> {"error": why}
#pragma once

#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/socket.h"
#include "base/status.h"
#include "base/tools_api.h"
#include "core/observe/comm_state.h"

namespace loom {

// Where the sockets are: LOOM_DOCTOR_DIR, else $XDG_RUNTIME_DIR/loom, else /tmp/loom-<uid>.
LOOM_TOOLS_API std::string doctorDirectory();
// The same without LOOM_DOCTOR_DIR.
std::string defaultDoctorDirectory();
// Process `pid`'s socket in `dir`, and the pid a socket's file name names (nullopt: not such a name).
std::string processSocketPath(const std::string& dir, int pid);
LOOM_TOOLS_API std::optional<int> processSocketPid(const std::string& fileName);
// The address of the socket at `path` (too long a path for one is an error).
Status processSocketAddress(const std::string& path, sockaddr_un* out);

// A job's name for loom-doctor: a hash of the communicator's secret (which it does not reveal).
std::string jobKey(const uint8_t* secret);

inline constexpr std::string_view kListRequest = "list";
inline constexpr std::string_view kReportRequest = "report";

struct DoctorRequest {
  std::string what;  // kListRequest or kReportRequest
  std::string job;   // the report's job
};
std::string requestLine(const DoctorRequest& request);
// Fails, saying why, on a line that is no such request.
Status parseRequest(const std::string& line, DoctorRequest* out);

// A list answer names each communicator of the process by its state (without the entries) and job.
struct ListedComm {
  CommState state;
  std::string job;
};
nlohmann::ordered_json listAnswer(int pid, const std::vector<ListedComm>& comms);
// A report answer: {"job", "comm", "text" (for a person, with why each missing rank is), "report"
// (core/observe/hang_report.h's JSON), "unreachable_why": {rank: why}}. states[r]: rank r's, or none
// (why[r] says why).
nlohmann::ordered_json reportAnswer(const std::string& job, const std::string& comm,
                                    const std::vector<std::optional<CommState>>& states,
                                    const std::vector<std::string>& why);
nlohmann::ordered_json errorAnswer(const std::string& why);
std::string answerLine(const nlohmann::ordered_json& answer);

// A request is short; an answer holds a whole job's report.
constexpr size_t kMaxRequestBytes = 4096;
constexpr size_t kMaxAnswerBytes = size_t{64} << 20;

// Lines from a socket, read a chunk at a time: what one recv brings past a line's end is kept for the
// next line, and a line longer than the cap is refused rather than buffered without end.
class LineReader {
 public:
  static constexpr size_t kChunkBytes = 4096;
  explicit LineReader(size_t maxLineBytes) : maxLineBytes_(maxLineBytes) {}

  // Takes what the socket holds now, without waiting; *line (without its '\n') once one is whole.
  Status readAvailable(const Socket& s, std::optional<std::string>* line);
  // Waits for a whole line until the deadline.
  Status readLine(const Socket& s, Deadline deadline, std::string* line);

 private:
  Status takeLine(std::optional<std::string>* line);

  size_t maxLineBytes_;
  std::string buffered_;
};

// Writes `line` and its '\n' by the deadline.
Status writeLine(const Socket& s, const std::string& line, Deadline deadline);

// loom-doctor's end: one request to the process behind `socketPath`, its answer by the deadline.
// *gone: nothing listens there (the socket file of a process that ended).
LOOM_TOOLS_API Status askProcess(const std::string& socketPath, const DoctorRequest& request, Deadline deadline,
                                 nlohmann::ordered_json* answer, bool* gone);

}  // namespace loom
