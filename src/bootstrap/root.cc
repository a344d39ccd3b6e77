#include "bootstrap/root.h"

#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "base/settings.h"
#include "base/log.h"

namespace loom {
namespace {

struct Joined {
  Socket socket;
  RankInfo info;
};

void sendReply(const Socket& s, uint32_t status, const void* data, uint32_t bytes, Deadline deadline) {
  RootReply reply{status, bytes};
  if (sendAll(s, &reply, sizeof(reply), deadline, nullptr).ok() && bytes > 0)
    (void)sendAll(s, data, bytes, deadline, nullptr);
}

void refuse(const Socket& s, const std::string& why) {
  LOOM_WARN(Boot, "rendezvous: refusing a rank: {}", why);
  sendReply(s, 1, why.data(), static_cast<uint32_t>(why.size()), Deadline::afterMs(kHelloTimeoutMs));
}

void serveRoot(Socket listener, UniqueIdData id) {
  Deadline deadline = Deadline::afterMs(settingInt(Setting::BootstrapTimeoutMs));
  std::map<int, Joined> joined;
  int nranks = -1;
  while (nranks < 0 || static_cast<int>(joined.size()) < nranks) {
    Socket client;
    Status st = acceptOne(listener, deadline, nullptr, &client);
    if (!st.ok()) {
      LOOM_WARN(Boot, "rendezvous on {} gives up with {} of {} ranks: {}", id.root.toString(), joined.size(),
                nranks, st.message());
      return;
    }
    Hello raw, hello;
    Deadline helloDeadline = Deadline::afterMs(kHelloTimeoutMs);
    Status received = recvAll(client, &raw, sizeof(raw), helloDeadline, nullptr);
    Status valid = received.ok() ? parseHello(&raw, sizeof(raw), id.secret, HelloKind::ToRoot, 0, &hello) : received;
    if (!valid.ok()) {
      LOOM_WARN(Boot, "rendezvous: dropped a connection: {}", valid.message());
      // A genuine rank of another library version deserves to know why it is refused.
      if (received.ok() && raw.magic == kWireMagic && raw.version != kWireVersion &&
          std::memcmp(raw.secret, id.secret, kSecretBytes) == 0)
        refuse(client, valid.message());
      continue;
    }
    RankInfo info;
    if (!recvAll(client, &info, sizeof(info), helloDeadline, nullptr).ok()) {
      LOOM_WARN(Boot, "rendezvous: rank {} hung up during hello", hello.rank);
      continue;
    }
    if (nranks < 0 && hello.nranks > 0) nranks = hello.nranks;
    if (hello.nranks != nranks) {
      refuse(client, fmt::format("rank {} says nranks={}, others said {}", hello.rank, hello.nranks, nranks));
      continue;
    }
    if (joined.count(hello.rank)) {
      refuse(client, fmt::format("rank {} is out of range or already joined (nranks={})", hello.rank, nranks));
      continue;
    }
    joined[hello.rank] = Joined{std::move(client), info};
  }
  std::vector<RankInfo> table;
  for (auto& [rank, j] : joined) table.push_back(j.info);
  uint32_t bytes = static_cast<uint32_t>(table.size() * sizeof(RankInfo));
  for (auto& [rank, j] : joined) sendReply(j.socket, 0, table.data(), bytes, deadline);
  LOOM_INFO(Boot, "rendezvous on {}: {} ranks joined", id.root.toString(), nranks);
}

}  // namespace

void startRoot(Socket listener, const UniqueIdData& id) {
  std::thread(serveRoot, std::move(listener), id).detach();
}

}  // namespace loom
