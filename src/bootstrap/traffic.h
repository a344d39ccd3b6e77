// What one party of a bootstrap (a rank, or the rendezvous) moved and held: the load generator
// (perf/bootstrap_scale) reports the busiest party's figures, and its bound test holds them.
#pragma once

#include <algorithm>
#include <cstdint>

namespace loom {

struct BootstrapTraffic {
  uint64_t bytesSent = 0;
  uint64_t bytesReceived = 0;
  int sockets = 0;      // held now (a listener counts)
  int socketsPeak = 0;  // the most held at once

  void opened(int count = 1) {
    sockets += count;
    socketsPeak = std::max(socketsPeak, sockets);
  }
  void closed(int count = 1) { sockets -= count; }
};

}  // namespace loom
