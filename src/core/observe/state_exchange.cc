#include "core/observe/state_exchange.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/communicator.h"

namespace loom {
namespace {

// A requester that connected sends its hello at once; one that does not is dropped this soon.
constexpr int kHelloMs = 1000;
// Ranks asked at once: enough to cover a large job in a few round trips, few enough to stay far from
// a process's descriptor limit.
constexpr int kParallelAsks = 32;
constexpr uint32_t kMaxStateBytes = 1u << 20;

Status askOne(const StateAddressBook& book, int peer, Deadline deadline, std::string* state) {
  const SocketAddress& addr = book.stateAddresses[static_cast<size_t>(peer)];
  if (addr.port == 0) return errorStatus(loomInvalidUsage, "rank {} serves no state (LOOM_DOCTOR=0)", peer);
  Socket s;
  LOOM_TRY(connectTo(addr, deadline, nullptr, &s, /*retryRefused=*/false));  // its rank's port was up
  Hello hello;
  std::memcpy(hello.secret, book.secret, kSecretBytes);
  hello.kind = static_cast<uint32_t>(HelloKind::State);
  hello.rank = book.rank;
  hello.nranks = book.nranks;
  LOOM_TRY(sendAll(s, &hello, sizeof(hello), deadline, nullptr));
  uint32_t bytes = 0;
  LOOM_TRY(recvAll(s, &bytes, sizeof(bytes), deadline, nullptr));
  if (bytes == 0 || bytes > kMaxStateBytes) return errorStatus(loomRemoteError, "rank {} sent a state of {} bytes", peer, bytes);
  state->resize(bytes);
  return recvAll(s, state->data(), bytes, deadline, nullptr);
}

}  // namespace

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

std::string commStateJson(const loomComm& comm) {
  nlohmann::ordered_json j;
  j["comm"] = comm.settings.name;
  j["rank"] = comm.rank;
  j["nranks"] = comm.nranks;
  if (comm.bootstrap) {
    const RankInfo& me = comm.bootstrap->table()[static_cast<size_t>(comm.rank)];
    j["host"] = me.process.host();
    j["pid"] = me.process.pid;
  }
  const nlohmann::json record = nlohmann::json::parse(comm.flight.json());
  for (const auto& [key, value] : record.items()) j[key] = value;
  return j.dump();
}

Status readStateHello(const Socket& connection, const uint8_t* secret, int nranks) {
  Hello raw, hello;
  LOOM_TRY(recvAll(connection, &raw, sizeof(raw), Deadline::afterMs(kHelloMs), nullptr));
  return parseHello(&raw, sizeof(raw), secret, HelloKind::State, nranks, &hello);
}

Status sendState(const Socket& connection, const std::string& state) {
  const uint32_t bytes = static_cast<uint32_t>(state.size());
  const Deadline deadline = Deadline::afterMs(kHelloMs);
  LOOM_TRY(sendAll(connection, &bytes, sizeof(bytes), deadline, nullptr));
  return sendAll(connection, state.data(), state.size(), deadline, nullptr);
}

std::vector<std::string> gatherStates(const StateAddressBook& book, Deadline deadline, std::vector<std::string>* why) {
  const int n = book.nranks;
  std::vector<std::string> states(static_cast<size_t>(n)), reasons(static_cast<size_t>(n));
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int r = next++; r < n; r = next++) {
      const Status st = askOne(book, r, deadline, &states[static_cast<size_t>(r)]);
      if (!st.ok()) {
        states[static_cast<size_t>(r)].clear();
        reasons[static_cast<size_t>(r)] = st.message();
      }
    }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < std::min(n, kParallelAsks); ++w) workers.emplace_back(worker);
  for (std::thread& t : workers) t.join();
  if (why) *why = std::move(reasons);
  return states;
}

}  // namespace loom
