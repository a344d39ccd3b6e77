#include "core/observe/state_exchange.h"

#include <cstring>

#include "core/communicator.h"

namespace loom {

StateAddressBook stateAddressBook(const loomComm& comm, const uint8_t* secret) {
  StateAddressBook book;
  std::memcpy(book.secret, secret, kSecretBytes);
  book.rank = comm.rank;
  book.nranks = comm.nranks;
  book.comm = comm.settings.name;
  for (const RankInfo& info : comm.bootstrap->table()) {
    SocketAddress addr = info.listenAddress;
    addr.port = info.statePort;
    book.stateAddresses.push_back(addr);
  }
  return book;
}

CommState commState(const loomComm& comm) {
  CommState state;
  state.comm = comm.settings.name;
  state.rank = comm.rank;
  state.nranks = comm.nranks;
  if (comm.bootstrap) {
    const RankInfo& me = comm.bootstrap->table()[static_cast<size_t>(comm.rank)];
    state.host = me.process.host();
    state.pid = me.process.pid;
  }
  if (comm.transports) {
    for (int p = 0; p < comm.nranks; ++p) switch (comm.transports->kind(p)) {
        case TransportKind::Local: ++state.connections.localPeers; break;
        case TransportKind::Shm: ++state.connections.shmPeers; break;
        case TransportKind::Net: ++state.connections.netPeers; break;
        case TransportKind::Self: break;
      }
    state.connections.netConnections = comm.transports->openNetConnections();
    state.connections.memoryConnections = comm.transports->madeMemoryConnections();
  }
  // Plan kernels end on the device: their launches say how far they got and whom a lane waits on.
  const device::DeviceProgress device = comm.device ? comm.device->progress() : device::DeviceProgress{};
  comm.flight.snapshot(&state, device.firstUnfinished, device.waitingOn);
  return state;
}

Hello stateHello(const StateAddressBook& book) {
  Hello hello;
  std::memcpy(hello.secret, book.secret, kSecretBytes);
  hello.kind = static_cast<uint32_t>(HelloKind::State);
  hello.rank = book.rank;
  hello.nranks = book.nranks;
  return hello;
}

Status checkStateHello(const std::string& request, const uint8_t* secret, int nranks) {
  Hello hello;
  return parseHello(request.data(), request.size(), secret, HelloKind::State, nranks, &hello);
}

std::string framedState(const CommState& state) {
  const std::string json = commStateText(state);
  const uint32_t bytes = static_cast<uint32_t>(json.size());
  std::string framed(sizeof(bytes), '\0');
  std::memcpy(framed.data(), &bytes, sizeof(bytes));
  return framed + json;
}

}  // namespace loom
