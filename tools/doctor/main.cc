// loom-doctor: who is stuck in a running Loom job, asked from any of its hosts. Every process with a
// live communicator answers on a Unix socket of its own (core/observe/doctor_protocol.h); this tool lists them,
// and for each job has one of its processes gather every rank's flight record (over the job's state
// ports, with the job's secret) into the hang report: the oldest operation not finished everywhere,
// the ranks that never entered it, those waiting in it, mismatched calls, failures, unreachable ranks.
//   loom-doctor [--list] [--json] [--pid PID] [--job KEY] [--dir DIR]
// Exit status: 0 when it reported, 2 when no Loom process answered, 1 on a bad argument.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/observe/doctor_protocol.h"

namespace {

using nlohmann::ordered_json;

// A list answer takes a moment; a report waits for every rank of the job (the process gives far
// hosts 5 s), so allow it more.
constexpr int kListMs = 3000;
constexpr int kReportMs = 15000;

// One request to the process behind `path`; nullopt when nothing listens there (*stale: the socket
// file of a process that ended) or it does not answer.
std::optional<ordered_json> ask(const std::string& path, const loom::DoctorRequest& request, int ms, bool* stale = nullptr) {
  ordered_json answer;
  bool gone = false;
  const bool answered = loom::askProcess(path, request, loom::Deadline::afterMs(ms), &answer, &gone).ok();
  if (stale) *stale = gone;
  return answered ? std::optional<ordered_json>(std::move(answer)) : std::nullopt;
}

struct Process {
  int pid = 0;
  std::string path;
  ordered_json comms;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Say who is stuck in a running Loom job: ask the Loom processes of this host, and through one of "
               "them every rank of each job, for their last operations; print the job-wide hang report."};
  bool list = false, json = false;
  int onlyPid = 0;
  std::string onlyJob, dir = loom::doctorDirectory();
  app.add_flag("--list", list, "only list this host's Loom processes and their communicators");
  app.add_flag("--json", json, "print JSON instead of text");
  app.add_option("--pid", onlyPid, "only the jobs of this process");
  app.add_option("--job", onlyJob, "only this job (its key, as --list prints it)");
  app.add_option("--dir", dir, "where the processes' sockets are (default: LOOM_DOCTOR_DIR, else $XDG_RUNTIME_DIR/loom, "
                               "else /tmp/loom-<uid>)");
  CLI11_PARSE(app, argc, argv);

  std::vector<Process> processes;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::optional<int> pid = loom::processSocketPid(entry.path().filename().string());
    if (!pid) continue;
    Process p;
    p.pid = *pid;
    p.path = entry.path().string();
    if (onlyPid != 0 && p.pid != onlyPid) continue;
    bool stale = false;
    const std::optional<ordered_json> answer = ask(p.path, {std::string(loom::kListRequest), ""}, kListMs, &stale);
    if (stale) std::filesystem::remove(entry.path(), ec);  // its process ended without removing it (SIGKILL)
    if (!answer || !answer->contains("comms")) continue;
    p.comms = (*answer)["comms"];
    processes.push_back(p);
  }
  if (processes.empty()) {
    std::cerr << "loom-doctor: no Loom process answered in " << dir
              << (onlyPid ? " (pid " + std::to_string(onlyPid) + ")" : std::string()) << "\n";
    return 2;
  }
  // Each job once, asked through the process that holds its lowest rank here.
  std::map<std::string, std::pair<int, std::string>> jobs;  // job -> (lowest local rank, that process's socket)
  for (const Process& p : processes)
    for (const auto& c : p.comms) {
      const std::string job = c.value("job", "");
      const int rank = c.value("rank", 0);
      if (!onlyJob.empty() && job != onlyJob) continue;
      auto it = jobs.find(job);
      if (it == jobs.end() || rank < it->second.first) jobs[job] = {rank, p.path};
    }
  if (list) {
    ordered_json out = ordered_json::array();
    for (const Process& p : processes) out.push_back({{"pid", p.pid}, {"comms", p.comms}});
    if (json) {
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    for (const Process& p : processes) {
      std::cout << fmt::format("pid {}\n", p.pid);
      for (const auto& c : p.comms) {
        const ordered_json links = c.value("connections", ordered_json::object());
        std::cout << fmt::format("  job {} comm '{}' rank {} of {}: issued #{}, finished up to #{}; peers: {} in this "
                                 "process, {} by shared memory, {} on other hosts ({} network connections open, {} to "
                                 "memory peers made so far){}\n",
                                 c.value("job", ""), c.value("comm", ""), c.value("rank", 0), c.value("nranks", 0),
                                 c.value("last_issued", 0), c.value("completed_up_to", 0), links.value("local_peers", 0),
                                 links.value("shm_peers", 0), links.value("net_peers", 0),
                                 links.value("net_connections", 0), links.value("memory_connections", 0),
                                 c.value("failure", "").empty() ? "" : "; failed: " + c.value("failure", ""));
      }
    }
    return 0;
  }
  if (jobs.empty()) {
    std::cerr << "loom-doctor: no process here serves job " << onlyJob << "\n";
    return 2;
  }
  ordered_json reports = ordered_json::array();
  for (const auto& [job, via] : jobs) {
    std::optional<ordered_json> answer = ask(via.second, {std::string(loom::kReportRequest), job}, kReportMs);
    if (!answer) answer = ordered_json{{"job", job}, {"error", "the process at " + via.second + " did not answer"}};
    if (json) {
      reports.push_back(*answer);
      continue;
    }
    std::cout << fmt::format("job {} (asked through rank {})\n", job, via.first);
    if (answer->contains("error")) std::cout << "  error: " << (*answer)["error"].get<std::string>() << "\n";
    else std::cout << (*answer)["text"].get<std::string>();
  }
  if (json) std::cout << reports.dump(2) << "\n";
  return 0;
}
