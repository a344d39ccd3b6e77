// This process's state service. While the process has a communicator (and LOOM_DOCTOR is not 0), one
// thread answers, without touching any operation path:
//  - the job's other ranks, on each communicator's state port (core/observe/state_ports.h), and
//  - loom-doctor, on the process's socket (core/observe/local_socket.h; what it asks:
//    core/observe/doctor_protocol.h): "list" this process's communicators, "report" one job's hang
//    report, gathered from every rank through the state ports (core/observe/state_gather.h).
// The same job-wide report is logged when an operation times out (LOOM_HANG_REPORT) and when the
// process receives LOOM_DUMP_SIGNAL (core/observe/dump_signal.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "base/socket.h"
#include "core/observe/state_exchange.h"

struct loomComm;

namespace loom {

// A communicator served by the state service until this is destroyed (before anything it reads).
class StateServing {
 public:
  StateServing(uint64_t id, StateAddressBook book) : id_(id), book_(std::move(book)) {}
  ~StateServing();
  StateServing(const StateServing&) = delete;
  StateServing& operator=(const StateServing&) = delete;

  // After an operation of the communicator timed out, on that operation's thread: gathers every
  // rank's state and logs the job-wide hang report (once per communicator; the lowest-numbered failed
  // rank logs it in full).
  void reportAfterTimeout();

 private:
  uint64_t id_;
  StateAddressBook book_;
  std::atomic<bool> reported_{false};
};

// Serves `comm` (after its init succeeded) on `listener`, the port openStatePort made.
std::unique_ptr<StateServing> serveState(loomComm* comm, Socket listener, const uint8_t* secret);

}  // namespace loom
