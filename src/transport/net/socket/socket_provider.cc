#include "transport/net/socket/socket_provider.h"

#include <sys/resource.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/settings.h"
#include "base/log.h"
#include "transport/net/handshake.h"
#include "transport/net/socket/socket_comms.h"

namespace loom::net::socket {

namespace {

constexpr int kMaxThreads = 16;  // NCCL's limits
constexpr int kMaxStreams = 64;

// Every connection holds 1 + streams descriptors at each end; a process with many ranks (threads)
// and peers needs more than the usual soft limit of 1024.
void raiseDescriptorLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  const rlim_t before = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? 1 << 20 : std::min<rlim_t>(lim.rlim_max, 1 << 20);
  if (setrlimit(RLIMIT_NOFILE, &lim) == 0 && before < lim.rlim_cur)
    LOOM_INFO(Net, "socket provider: raised the open-file limit from {} to {}", before, lim.rlim_cur);
}

std::string sysNetPath(const std::string& nic, const char* leaf) { return "/sys/class/net/" + nic + "/" + leaf; }

int linkSpeedMbps(const std::string& nic) {
  std::ifstream in(sysNetPath(nic, "speed"));
  long speed = 0;
  // Virtual links (veth, lo) report no speed (-1 or an error): assume 10 Gb/s as NCCL does.
  return (in >> speed) && speed > 0 && speed < INT_MAX ? static_cast<int>(speed) : 10000;
}

std::string pciPathOf(const std::string& nic) {
  std::error_code ec;
  auto path = std::filesystem::canonical(sysNetPath(nic, "device"), ec);
  return ec ? "" : path.string();
}

}  // namespace

Status readSocketConfig(SocketConfig* out) {
  SocketConfig c;
  // Measured on the 2-core test bed (docs/PERFORMANCE.md): with no core to spare, helper threads only
  // take turns with the ranks; hosts with cores (and NICs) to spare set more.
  for (Setting s : {Setting::SocketNThreads, Setting::NSocksPerThread, Setting::SocketBuffer}) LOOM_TRY(checkSetting(s));
  c.nthreads = static_cast<int>(settingInt(Setting::SocketNThreads));
  c.nsocksPerThread = static_cast<int>(settingInt(Setting::NSocksPerThread));
  c.inlineBytes = static_cast<size_t>(settingInt(Setting::SocketInline));
  c.bufferBytes = static_cast<int>(settingInt(Setting::SocketBuffer));
  if (c.nthreads < 0 || c.nthreads > kMaxThreads)
    return invalidArgument("LOOM_SOCKET_NTHREADS={} is outside 0..{}", c.nthreads, kMaxThreads);
  if (c.nsocksPerThread < 1 || c.streams() > kMaxStreams)
    return invalidArgument("LOOM_NSOCKS_PERTHREAD={} with {} thread(s) is outside 1..{} streams", c.nsocksPerThread,
                           c.nthreads, kMaxStreams);
  if (c.bufferBytes < 0) return invalidArgument("LOOM_SOCKET_BUFFER={} is negative", c.bufferBytes);
  *out = c;
  return Status::Ok();
}

Status SocketProvider::create(const SocketConfig& config, std::unique_ptr<Provider>* out) {
  std::unique_ptr<SocketProvider> p(new SocketProvider());
  LOOM_TRY(listInterfaces("", &p->devices_));
  if (p->devices_.empty()) return systemError("the socket provider found no network interface that is up");
  // The loopback device serves ranks of one host, and tests; real interfaces come first.
  std::vector<NetworkInterface> all;
  LOOM_TRY(listInterfaces("=lo", &all));
  for (const NetworkInterface& nic : all)
    if (nic.loopback && std::none_of(p->devices_.begin(), p->devices_.end(), [&](const auto& d) { return d.name == nic.name; }))
      p->devices_.push_back(nic);
  raiseDescriptorLimit();
  p->shared_ = std::make_shared<SocketShared>();
  p->shared_->config = config;
  p->shared_->instance = randomNonZero64();
  for (int i = 0; i < config.nthreads; ++i)
    p->shared_->helpers.push_back(std::make_unique<HelperThread>(&p->shared_->signal));
  *out = std::move(p);
  return Status::Ok();
}

SocketProvider::~SocketProvider() = default;

Status SocketProvider::deviceProperties(int device, DeviceProperties* out) const {
  if (device < 0 || device >= deviceCount()) return invalidArgument("socket provider: no device {}", device);
  const NetworkInterface& nic = devices_[device];
  DeviceProperties p;
  p.name = nic.name;
  p.pciPath = pciPathOf(nic.name);
  p.guid = static_cast<uint64_t>(device);
  p.ptrSupport = kHostPointers;
  p.regIsGlobal = true;
  p.hostNeedsRegistration = false;
  p.speedMbps = linkSpeedMbps(nic.name);
  p.port = 0;
  p.latencyUs = 0;
  p.maxComms = 65536;
  p.maxRecvs = 1;
  *out = p;
  return Status::Ok();
}

Status SocketProvider::listen(int device, Handle* handle, std::unique_ptr<ListenComm>* out) {
  if (device < 0 || device >= deviceCount()) return invalidArgument("socket provider: no device {}", device);
  return SocketListenComm::create(shared_, devices_[device].address, handle, out)
      .withContext("listening on " + devices_[device].name);
}

Status SocketProvider::connect(int device, Handle* handle, std::unique_ptr<SendComm>* out) {
  (void)device;  // the route to the peer's address decides the interface
  out->reset();
  SocketHandle h;
  std::memcpy(&h, handle->bytes.data(), sizeof h);
  if (h.magic != kHandleMagic || h.version != kProtocolVersion)
    return invalidArgument("not a handle of this socket provider (magic {:#x}, version {})", h.magic, h.version);
  if (h.nstreams == 0 || h.nstreams > kMaxStreams) return invalidArgument("handle names {} streams", h.nstreams);
  if (h.connectId == 0) {
    h.connectId = nextConnectId_++;
    std::memcpy(handle->bytes.data(), &h, sizeof h);
    connecting_[h.connectId] = std::make_unique<SocketConnector>(shared_, h);
  }
  auto it = connecting_.find(h.connectId);
  if (it == connecting_.end()) return invalidArgument("handle of a connection this provider did not start");
  bool done = false;
  Status st = it->second->step(&done);
  if (!st.ok() || done) {
    if (st.ok()) *out = it->second->finish();
    connecting_.erase(it);
  }
  return st;
}

void SocketProvider::pairComms(SendComm& send, RecvComm& recv) {
  auto* s = dynamic_cast<SocketSendComm*>(&send);
  auto* r = dynamic_cast<SocketRecvComm*>(&recv);
  if (!s || !r) return;
  const uint64_t peer = s->link().peerInstance();
  if (peer == 0 || peer != r->link().peerInstance() || peer == shared_->instance || !s->link().idle()) return;
  // The connection the lower instance opened carries both directions; the higher one moves its
  // sending side onto it, and the lower one's receiving side follows the switch mark.
  if (shared_->instance < peer)
    r->link().expectControlMove(s->link().control());
  else
    s->link().moveControlTo(r->link().control());
}

}  // namespace loom::net::socket
