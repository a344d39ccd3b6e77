#include "core/observe/doctor_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "base/env.h"
#include "base/hash.h"
#include "base/settings.h"
#include "bootstrap/wire.h"
#include "core/observe/hang_report.h"

namespace loom {

std::string doctorDirectory() {
  const std::string dir = settingText(Setting::DoctorDir);
  return dir.empty() ? defaultDoctorDirectory() : dir;
}

std::string defaultDoctorDirectory() {
  if (const std::string runtime = envString("XDG_RUNTIME_DIR", ""); !runtime.empty()) return runtime + "/loom";
  return fmt::format("/tmp/loom-{}", geteuid());
}

std::string processSocketPath(const std::string& dir, int pid) { return fmt::format("{}/{}.sock", dir, pid); }

std::optional<int> processSocketPid(const std::string& fileName) {
  constexpr std::string_view kSuffix = ".sock";
  if (fileName.size() <= kSuffix.size() || !fileName.ends_with(kSuffix)) return std::nullopt;
  const char* end = fileName.data() + fileName.size() - kSuffix.size();
  int pid = 0;
  const auto [stop, error] = std::from_chars(fileName.data(), end, pid);
  if (error != std::errc() || stop != end || pid <= 0) return std::nullopt;
  return pid;
}

Status processSocketAddress(const std::string& path, sockaddr_un* out) {
  *out = sockaddr_un{};
  out->sun_family = AF_UNIX;
  if (path.size() >= sizeof(out->sun_path)) return invalidArgument("the socket path {} is too long", path);
  std::memcpy(out->sun_path, path.c_str(), path.size() + 1);
  return Status::Ok();
}

std::string jobKey(const uint8_t* secret) {
  return fmt::format("{:016x}", Fnv1a().bytes(secret, kSecretBytes).digest());
}

std::string requestLine(const DoctorRequest& request) {
  nlohmann::ordered_json j = {{"request", request.what}};
  if (request.what == kReportRequest) j["job"] = request.job;
  return j.dump();
}

Status parseRequest(const std::string& line, DoctorRequest* out) {
  try {
    const nlohmann::json j = nlohmann::json::parse(line);
    out->what = j.value("request", "");
    out->job = j.value("job", "");
  } catch (const std::exception& e) {
    return invalidArgument("bad request: {}", e.what());
  }
  if (out->what != kListRequest && out->what != kReportRequest)
    return invalidArgument("unknown request '{}' ({}, {})", out->what, kListRequest, kReportRequest);
  return Status::Ok();
}

nlohmann::ordered_json listAnswer(int pid, const std::vector<ListedComm>& comms) {
  nlohmann::ordered_json listed = nlohmann::ordered_json::array();
  for (const ListedComm& c : comms) {
    nlohmann::ordered_json j = c.state;
    j.erase("entries");
    j["job"] = c.job;
    listed.push_back(std::move(j));
  }
  return {{"pid", pid}, {"comms", listed}};
}

nlohmann::ordered_json reportAnswer(const std::string& job, const std::string& comm,
                                    const std::vector<std::optional<CommState>>& states,
                                    const std::vector<std::string>& why) {
  HangReport report = analyzeHang(states);
  nlohmann::ordered_json unreachable = nlohmann::json::object();
  for (size_t r = 0; r < states.size(); ++r)
    if (!states[r]) {
      unreachable[std::to_string(r)] = why[r];
      report.text += fmt::format("  rank {} did not answer: {}\n", r, why[r]);
    }
  return {{"job", job}, {"comm", comm}, {"text", report.text}, {"report", report.json}, {"unreachable_why", unreachable}};
}

nlohmann::ordered_json errorAnswer(const std::string& why) { return {{"error", why}}; }

std::string answerLine(const nlohmann::ordered_json& answer) { return answer.dump() + "\n"; }

Status LineReader::takeLine(std::optional<std::string>* line) {
  const size_t end = buffered_.find('\n');
  if (end == std::string::npos ? buffered_.size() > maxLineBytes_ : end > maxLineBytes_)
    return invalidArgument("a line longer than {} bytes", maxLineBytes_);
  if (end != std::string::npos) {
    *line = buffered_.substr(0, end);
    buffered_.erase(0, end + 1);
  }
  return Status::Ok();
}

Status LineReader::readAvailable(const Socket& s, std::optional<std::string>* line) {
  line->reset();
  LOOM_TRY(takeLine(line));
  char chunk[kChunkBytes];
  while (!*line) {
    size_t got = 0;
    LOOM_TRY(recvSome(s, chunk, sizeof chunk, &got));
    if (got == 0) break;
    buffered_.append(chunk, got);
    LOOM_TRY(takeLine(line));
  }
  return Status::Ok();
}

Status LineReader::readLine(const Socket& s, Deadline deadline, std::string* line) {
  for (;;) {
    std::optional<std::string> got;
    LOOM_TRY(readAvailable(s, &got));
    if (got) {
      *line = std::move(*got);
      return Status::Ok();
    }
    LOOM_TRY(waitReady(s, POLLIN, deadline, "recv"));
  }
}

Status writeLine(const Socket& s, const std::string& line, Deadline deadline) {
  const std::string bytes = line + "\n";
  return sendAll(s, bytes.data(), bytes.size(), deadline, nullptr);
}

Status askProcess(const std::string& socketPath, const DoctorRequest& request, Deadline deadline,
                  nlohmann::ordered_json* answer, bool* gone) {
  *gone = false;
  sockaddr_un addr;
  LOOM_TRY(processSocketAddress(socketPath, &addr));
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return systemError("socket: {}", std::strerror(errno));
  if (connect(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    *gone = err == ECONNREFUSED;
    return systemError("connect to {}: {}", socketPath, std::strerror(err));
  }
  LOOM_TRY(writeLine(s, requestLine(request), deadline));
  std::string line;
  LOOM_TRY(LineReader(kMaxAnswerBytes).readLine(s, deadline, &line));
  try {
    *answer = nlohmann::ordered_json::parse(line);
  } catch (const std::exception& e) {
    return errorStatus(loomRemoteError, "{} answered no JSON: {}", socketPath, e.what());
  }
  return Status::Ok();
}

}  // namespace loom
