#include "transport/net/fifo_proxy.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "base/log.h"
#include "transport/net/net_setup.h"

namespace loom::net {
namespace {

uint64_t loadAcquire(uint64_t* word) { return std::atomic_ref<uint64_t>(*word).load(std::memory_order_acquire); }
void storeRelease(uint64_t* word, uint64_t v) { std::atomic_ref<uint64_t>(*word).store(v, std::memory_order_release); }

// Idle passes that only yield before the proxy sleeps: a message usually follows the last one closely.
constexpr int kYieldingPasses = 64;
// Idle this long, the proxy sleeps up to kDeepIdleSleepUs, even on comms that ask to be looked at more
// often (a plugin names no file descriptor): nothing has moved for a while, and a launch wakes it.
constexpr int64_t kDeepIdleAfterUs = 50000;
constexpr int64_t kDeepIdleSleepUs = 2000;

}  // namespace

// One direction of one (peer, channel): its FIFO, its comm, and the requests in flight in posting order.
struct FifoProxy::Lane {
  int peer = -1;
  uint32_t channel = 0;
  bool sends = false;
  cuda::DeviceFifo fifo;
  std::unique_ptr<SendComm> sendComm;
  std::unique_ptr<RecvComm> recvComm;
  MemoryRegion* region = nullptr;
  uint64_t posted = 0;                 // messages posted to the provider
  uint64_t finished = 0;               // messages done: sent (head) or handed to the kernel (tail)
  std::deque<Request*> inFlight;       // posted, not yet done, oldest first
  Request* flush = nullptr;            // the oldest receive's flush, while it runs
  size_t arrivedBytes = 0;             // the oldest receive's size, while its flush runs

  Comm& comm() { return sends ? static_cast<Comm&>(*sendComm) : static_cast<Comm&>(*recvComm); }
  char* slot(uint64_t seq) const { return fifo.slots + (seq % fifo.nslots) * fifo.slotBytes; }
  std::string describe() const {
    return fmt::format("the network lane {} rank {} (channel {})", sends ? "to" : "from", peer, channel);
  }
};

Status FifoProxy::start(PeerExchange& exchange, std::unique_ptr<Provider> provider, const Status& providerError,
                        int device, ProxiedFifos fifos, int64_t timeoutMs,
                        std::function<void(int peer, const Status&)> onFailure, std::unique_ptr<FifoProxy>* out) {
  out->reset();
  const int nranks = exchange.nranks();
  const uint32_t nch = fifos.nchannels;  // the tables' stride
  // A network peer's lanes are its channels 0..laneChannels-1 (every rank uses as many).
  auto present = [&](int q, uint32_t c) {
    const size_t i = static_cast<size_t>(q) * nch + c;
    return i < fifos.sends.size() && fifos.sends[i].present() && fifos.recvs[i].present();
  };
  const uint32_t laneChannels = fifos.laneChannels;
  std::vector<bool> peers(nranks, false);
  for (int q = 0; q < nranks; ++q) peers[q] = present(q, 0);
  std::vector<std::unique_ptr<SendComm>> sendComms;
  std::vector<std::unique_ptr<RecvComm>> recvComms;
  LOOM_TRY(connectNetComms(exchange, provider.get(), providerError, device, peers, static_cast<int>(laneChannels),
                           kLaneConnectionsTag, timeoutMs, &sendComms, &recvComms)
               .withContext("network lanes of plan kernels"));

  std::unique_ptr<FifoProxy> proxy(new FifoProxy());
  proxy->provider_ = std::move(provider);
  for (int q = 0; q < nranks; ++q)
    for (uint32_t c = 0; peers[q] && c < laneChannels; ++c) {
      const size_t i = static_cast<size_t>(q) * nch + c, comm = static_cast<size_t>(q) * laneChannels + c;
      if (!present(q, c))
        return errorStatus(loomInternalError, "network lanes: rank {} has {} channel(s) but not channel {}", q,
                           laneChannels, c);
      for (bool sends : {true, false}) {
        Lane lane;
        lane.peer = q;
        lane.channel = c;
        lane.sends = sends;
        lane.fifo = sends ? fifos.sends[i] : fifos.recvs[i];
        if (sends) lane.sendComm = std::move(sendComms[comm]);
        else lane.recvComm = std::move(recvComms[comm]);
        proxy->lanes_.push_back(std::move(lane));
      }
    }
  // Every slot registered once; a lane's slots are one range.
  for (Lane& lane : proxy->lanes_) {
    void* data = lane.fifo.slots;
    const size_t bytes = lane.fifo.slotBytes * lane.fifo.nslots;
    Status registered;
    if (fifos.slotPointerKind == kDmabufPointers) {
      int fd = -1;
      uint64_t offset = 0;
      registered = fifos.dmabufOf(data, bytes, &fd, &offset);
      if (registered.ok()) registered = lane.comm().registerDmabuf(data, bytes, fd, offset, &lane.region);
      if (fd >= 0) close(fd);
    } else {
      registered = lane.comm().registerMemory(data, bytes, fifos.slotPointerKind, &lane.region);
    }
    LOOM_TRY(registered.withContext("registering the slots of " + lane.describe()));
  }
  proxy->wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (proxy->wakeFd_ < 0) return errorStatus(loomSystemError, "eventfd for the network lanes' proxy: {}", strerror(errno));
  proxy->onFailure_ = std::move(onFailure);
  FifoProxy* self = proxy.get();
  proxy->thread_ = std::thread([self] { self->run(); });
  *out = std::move(proxy);
  return Status::Ok();
}

FifoProxy::~FifoProxy() {
  stop_.store(true);
  wake();
  if (thread_.joinable()) thread_.join();
  // Requests still in flight cannot be cancelled (ncclNet has no call for it): the regions go first,
  // then the comms, which drop what they still held, as NCCL's proxy frees a connection.
  for (Lane& lane : lanes_)
    if (lane.region) (void)lane.comm().deregisterMemory(lane.region).ok();
  lanes_.clear();
  if (wakeFd_ >= 0) close(wakeFd_);
}

void FifoProxy::wake() {
  const uint64_t one = 1;
  if (wakeFd_ >= 0) (void)!write(wakeFd_, &one, sizeof one);
}

void FifoProxy::run() {
  int idlePasses = 0;
  int64_t sleepUs = 1, sleptUs = 0;
  bool failed = false;
  while (!stop_.load(std::memory_order_relaxed)) {
    bool moved = false;
    for (Lane& lane : lanes_) {
      if (failed) break;
      Status s = progress(lane, &moved);
      if (s.ok()) continue;
      // The lane's peer is gone or its comm broke: nothing more moves on any lane (a plan kernel
      // waiting on one of them is told through onFailure_ and its abort word, not by a hang).
      failed = true;
      onFailure_(lane.peer, s.withContext(lane.describe()));
    }
    if (moved) {
      idlePasses = 0;
      sleepUs = 1;
      sleptUs = 0;
      continue;
    }
    if (++idlePasses < kYieldingPasses && !failed) {
      std::this_thread::yield();
      continue;
    }
    const bool deep = failed || sleptUs > kDeepIdleAfterUs;
    if (sleepIdle(deep ? kDeepIdleSleepUs : sleepUs, deep)) {  // woken: a launch, look again at once
      idlePasses = 0;
      sleepUs = 1;
      sleptUs = 0;
      continue;
    }
    sleptUs += deep ? kDeepIdleSleepUs : sleepUs;
    sleepUs = std::min<int64_t>(sleepUs * 2, kMaxIdleSleepUs);
  }
}

// Sleeps until a comm has something (what addWaits names), wake() was called, or `us` passed (no
// longer than the comms allow unless `deep`). True when wake() ended it.
bool FifoProxy::sleepIdle(int64_t us, bool deep) {
  WaitList waits;
  waits.add(wakeFd_, POLLIN);
  for (Lane& lane : lanes_) lane.comm().addWaits(&waits);
  const int64_t sleep = deep ? us : std::min(us, waits.maxSleepUs);
  const timespec ts{static_cast<time_t>(sleep / 1000000), static_cast<long>(sleep % 1000000) * 1000};
  if (ppoll(waits.fds.data(), waits.fds.size(), &ts, nullptr) <= 0 || !(waits.fds[0].revents & POLLIN)) return false;
  uint64_t drained = 0;
  (void)!read(wakeFd_, &drained, sizeof drained);
  return true;
}

Status FifoProxy::progress(Lane& lane, bool* moved) {
  return lane.sends ? progressSend(lane, moved) : progressRecv(lane, moved);
}

Status FifoProxy::progressSend(Lane& lane, bool* moved) {
  const cuda::DeviceFifo& f = lane.fifo;
  const uint64_t written = loadAcquire(f.tail);
  while (lane.posted < written && lane.inFlight.size() < kMaxRequestsPerComm) {
    const uint64_t bytes = f.sizes[lane.posted % f.nslots];  // published by the tail's release
    if (bytes > f.slotBytes)  // a direct-mode mark or garbage: this FIFO has no posts
      return errorStatus(loomInternalError, "message {} is {} bytes, more than a slot ({})", lane.posted, bytes,
                         f.slotBytes);
    Request* request = nullptr;
    LOOM_TRY(lane.sendComm->isend(lane.slot(lane.posted), bytes, 0, lane.region, &request));
    if (!request) break;  // the provider takes no more now
    lane.inFlight.push_back(request);
    ++lane.posted;
    *moved = true;
  }
  while (!lane.inFlight.empty()) {
    bool done = false;
    LOOM_TRY(lane.sendComm->test(lane.inFlight.front(), &done, nullptr));
    if (!done) break;
    lane.inFlight.pop_front();
    storeRelease(f.head, ++lane.finished);  // the slot is the kernel's again
    *moved = true;
  }
  return Status::Ok();
}

Status FifoProxy::progressRecv(Lane& lane, bool* moved) {
  const cuda::DeviceFifo& f = lane.fifo;
  const uint64_t consumed = loadAcquire(f.head);
  while (lane.posted < consumed + f.nslots && lane.inFlight.size() < kMaxRequestsPerComm) {
    void* data = lane.slot(lane.posted);
    const size_t bytes = f.slotBytes;
    const int tag = 0;
    Request* request = nullptr;
    LOOM_TRY(lane.recvComm->irecv(1, &data, &bytes, &tag, &lane.region, &request));
    if (!request) break;
    lane.inFlight.push_back(request);
    ++lane.posted;
    *moved = true;
  }
  while (!lane.inFlight.empty()) {
    void* data = lane.slot(lane.finished);
    if (!lane.flush) {
      bool done = false;
      size_t bytes = 0;
      LOOM_TRY(lane.recvComm->test(lane.inFlight.front(), &done, &bytes));
      if (!done) break;
      lane.arrivedBytes = bytes;
      // GPU memory the NIC wrote is visible to the GPU only after a flush (a provider with nothing to
      // flush posts none).
      LOOM_TRY(lane.recvComm->iflush(1, &data, &bytes, &lane.region, &lane.flush));
      *moved = true;
    }
    if (lane.flush) {
      bool done = false;
      LOOM_TRY(lane.recvComm->test(lane.flush, &done, nullptr));
      if (!done) break;
      lane.flush = nullptr;
    }
    lane.inFlight.pop_front();
    f.sizes[lane.finished % f.nslots] = lane.arrivedBytes;
    storeRelease(f.tail, ++lane.finished);  // the message is the kernel's
    *moved = true;
  }
  return Status::Ok();
}

}  // namespace loom::net
