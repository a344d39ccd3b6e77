// The network providers the network tests run against, on the loopback device: Loom's socket provider
// (helper threads and inline), ucx, ib over FakeVerbs ("ib_fake_verbs", a test double:
// fake_verbs/README.md) and, where LOOM_TEST_REAL_VERBS=1, over the system's libibverbs ("ib_verbs";
// --gtest_filter='*/ib_verbs' runs those alone, as the Soft-RoCE VM does), and the socket provider
// exported as NCCL net plugins v8, v10 and v12 and loaded back through the plugin loader.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/socket.h"
#include "transport/net/provider.h"

namespace loom::net {

struct ProviderCase {
  std::string label;
  // Makes a provider; safe to call from several threads at once (it touches no environment).
  std::function<Status(std::unique_ptr<Provider>*)> make;
  // Where a stranger can reach the listen comm that made `handle` (the handshake's port).
  std::function<SocketAddress(const Handle&)> listenAddress;
  std::string deviceSpec = "lo";  // chooseDevice's spec ("": the provider's first device)
  // Variables `make` needs (nullopt: unset), set by CaseEnvironment before any thread of the test
  // starts: setenv while another thread reads or writes the environment is a data race.
  std::vector<std::pair<std::string, std::optional<std::string>>> environment = {};
};

// Sets a case's environment for the life of the object, and puts the old values back.
class CaseEnvironment {
 public:
  explicit CaseEnvironment(const ProviderCase& pc);
  ~CaseEnvironment();
  CaseEnvironment(const CaseEnvironment&) = delete;
  CaseEnvironment& operator=(const CaseEnvironment&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::vector<ProviderCase> providerCases();

}  // namespace loom::net
