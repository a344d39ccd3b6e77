// What one party of a bootstrap (a rank, or the rendezvous) moved and held: the load generator
// (perf/bootstrap_scale) reports the busiest party's figures, and its bound test holds them.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace loom {

struct BootstrapTraffic {
  // Atomic: after init a rank's operations send messages through the bootstrap (network connections
  // made on first use) while its caller may run a setup exchange (a split) on it.
  std::atomic<uint64_t> bytesSent{0};
  std::atomic<uint64_t> bytesReceived{0};
  int sockets = 0;      // held now (a listener counts)
  int socketsPeak = 0;  // the most held at once

  BootstrapTraffic() = default;
  BootstrapTraffic(const BootstrapTraffic& other) { *this = other; }
  BootstrapTraffic& operator=(const BootstrapTraffic& other) {
    bytesSent = other.bytesSent.load(std::memory_order_relaxed);
    bytesReceived = other.bytesReceived.load(std::memory_order_relaxed);
    sockets = other.sockets;
    socketsPeak = other.socketsPeak;
    return *this;
  }

  void opened(int count = 1) {
    sockets += count;
    socketsPeak = std::max(socketsPeak, sockets);
  }
  void closed(int count = 1) { sockets -= count; }
};

}  // namespace loom
