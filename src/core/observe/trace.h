// LOOM_TRACE_FILE: a Chrome trace (JSON, viewable in Perfetto or chrome://tracing) per rank with one
// event per operation and per plan step. "%r" in the path becomes the rank, "%p" the pid; without
// "%r" the rank is appended ("trace.json" -> "trace.json.3"). Events are kept in memory (at most
// LOOM_TRACE_MAX_EVENTS, default 1M) and written when the communicator is destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom {

class Tracer {
 public:
  static std::unique_ptr<Tracer> fromEnvironment(int rank, const std::string& commName);
  ~Tracer();

  void operation(const std::string& name, uint64_t startNs, uint64_t endNs);
  void step(int lane, const char* kind, int peer, uint64_t bytes, uint64_t startNs, uint64_t endNs);

 private:
  struct Event {
    std::string name;
    int tid;
    uint64_t startNs, endNs;
    int peer;
    uint64_t bytes;
  };
  Tracer() = default;
  bool room();

  std::string path_;
  int rank_ = 0;
  std::string commName_;
  size_t maxEvents_ = 0;
  size_t dropped_ = 0;
  uint64_t originNs_ = 0;
  std::vector<Event> events_;
};

}  // namespace loom
