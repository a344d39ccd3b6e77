// This process's state service. While the process has a communicator (and LOOM_DOCTOR is not 0), one
// thread answers, without touching any operation path:
//  - the job's other ranks, on each communicator's state port (a TCP listener on the bootstrap's
//    interface whose port init exchanged; a request must prove the communicator's secret), and
//  - loom-doctor, on a Unix socket <doctorDirectory()>/<pid>.sock (an owner-only directory; a peer of
//    another user is refused): "list" this process's communicators, "report" one job's hang report,
//    gathered from every rank through the state ports.
// The same job-wide report is logged when an operation times out (LOOM_HANG_REPORT) and when the
// process receives LOOM_DUMP_SIGNAL (SIGUSR1 unless the program handles it).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "base/socket.h"
#include "base/status.h"
#include "core/observe/state_exchange.h"

struct loomComm;

namespace loom {

// The communicator's state port, opened before the rendezvous so that its number travels in the
// rank's RankInfo; no listener and port 0 with LOOM_DOCTOR=0.
Status openStatePort(Socket* listener, uint16_t* port);

// A communicator served by the state service until this is destroyed (before anything it reads).
class StateServing {
 public:
  StateServing(uint64_t id, StateAddressBook book) : id_(id), book_(std::move(book)) {}
  ~StateServing();
  StateServing(const StateServing&) = delete;
  StateServing& operator=(const StateServing&) = delete;

  // After an operation of the communicator timed out: gathers every rank's state and logs the
  // job-wide hang report (once per communicator; the lowest-numbered failed rank logs it in full).
  void reportAfterTimeout();

 private:
  uint64_t id_;
  StateAddressBook book_;
  std::atomic<bool> reported_{false};
};

// Serves `comm` (after its init succeeded) on `listener`, the port openStatePort made.
std::unique_ptr<StateServing> serveState(loomComm* comm, Socket listener, const uint8_t* secret);

// Where the per-process sockets are: LOOM_DOCTOR_DIR, else $XDG_RUNTIME_DIR/loom, else /tmp/loom-<uid>.
std::string doctorDirectory();
// The same without LOOM_DOCTOR_DIR.
std::string defaultDoctorDirectory();

// A job's name for loom-doctor: a hash of the communicator's secret (which it does not reveal).
std::string jobKey(const uint8_t* secret);

}  // namespace loom
