#include "core/observe/trace.h"

#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/settings.h"
#include "base/rank_path.h"
#include "base/log.h"

namespace loom {

std::unique_ptr<Tracer> Tracer::fromEnvironment(int rank, const std::string& commName) {
  std::string pattern = settingText(Setting::TraceFile);
  if (pattern.empty()) return nullptr;
  bool hasRank = false;
  std::string path = pathForRank(pattern, rank, &hasRank);
  if (!hasRank) path += "." + std::to_string(rank);
  std::unique_ptr<Tracer> t(new Tracer());
  t->path_ = path;
  t->rank_ = rank;
  t->commName_ = commName;
  t->maxEvents_ = static_cast<size_t>(settingInt(Setting::TraceMaxEvents));
  t->originNs_ = nowNs();
  return t;
}

bool Tracer::room() {
  if (events_.size() < maxEvents_) return true;
  ++dropped_;
  return false;
}

void Tracer::operation(const std::string& name, uint64_t startNs, uint64_t endNs) {
  if (room()) events_.push_back(Event{name, 0, startNs, endNs, -1, 0});
}

void Tracer::step(int lane, const char* kind, int peer, uint64_t bytes, uint64_t startNs, uint64_t endNs) {
  if (room()) events_.push_back(Event{kind, lane + 1, startNs, endNs, peer, bytes});
}

Tracer::~Tracer() {
  std::ofstream out(path_);
  if (!out) {
    LOOM_WARN(Init, "LOOM_TRACE_FILE: cannot write {}", path_);
    return;
  }
  // Chrome's trace format, one event per line: the file is written as it is built, so a million
  // events are never one JSON value in memory.
  const nlohmann::json head = {{"comm", commName_}, {"rank", rank_}, {"dropped", dropped_}};
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":" << head.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
      << ",\n\"traceEvents\":[\n";
  out << nlohmann::json{{"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"args", {{"name", "rank " + std::to_string(rank_)}}}}.dump();
  for (const Event& e : events_) {
    nlohmann::json event = {{"name", e.name},
                            {"cat", e.tid == 0 ? "op" : "step"},
                            {"ph", "X"},
                            {"ts", static_cast<double>(e.startNs - originNs_) / 1000.0},
                            {"dur", static_cast<double>(e.endNs - e.startNs) / 1000.0},
                            {"pid", rank_},
                            {"tid", e.tid}};
    if (e.tid != 0) event["args"] = {{"peer", e.peer}, {"bytes", e.bytes}};
    out << ",\n" << event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  out << "\n]}\n";
}

}  // namespace loom
