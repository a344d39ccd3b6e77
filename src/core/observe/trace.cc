#include "core/observe/trace.h"

#include <unistd.h>

#include <cstdio>

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

namespace {

std::string jsonEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

}  // namespace

Tracer::~Tracer() {
  std::FILE* f = std::fopen(path_.c_str(), "w");
  if (!f) {
    LOOM_WARN(Init, "LOOM_TRACE_FILE: cannot write {}", path_);
    return;
  }
  std::fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"comm\":\"%s\",\"rank\":%d,\"dropped\":%zu},\n",
               jsonEscape(commName_).c_str(), rank_, dropped_);
  std::fprintf(f, "\"traceEvents\":[\n");
  std::fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}", rank_, rank_);
  for (const Event& e : events_) {
    double ts = static_cast<double>(e.startNs - originNs_) / 1000.0;
    double dur = static_cast<double>(e.endNs - e.startNs) / 1000.0;
    std::fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d",
                 jsonEscape(e.name).c_str(), e.tid == 0 ? "op" : "step", ts, dur, rank_, e.tid);
    if (e.tid != 0) std::fprintf(f, ",\"args\":{\"peer\":%d,\"bytes\":%llu}", e.peer, static_cast<unsigned long long>(e.bytes));
    std::fprintf(f, "}");
  }
  std::fprintf(f, "\n]}\n");
  std::fclose(f);
}

}  // namespace loom
