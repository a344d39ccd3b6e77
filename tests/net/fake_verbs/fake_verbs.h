// FakeVerbs, a test double of libibverbs (README.md): the objects behind the verbs structs it hands
// out, and the one process-wide fabric that connects its QPs. Everything is guarded by one lock:
// a test double needs clarity more than speed.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace fakeverbs {

struct FakeGid {
  ibv_gid gid{};
  ibv_gid_type type = IBV_GID_TYPE_IB;
};

struct FakeDevice {
  ibv_device device{};  // first: the library's pointers are to it
  std::string name;
  // Rewritten (under the fabric's lock) by every ibv_get_device_list, read by ibv_query_port without
  // it: ranks that are threads of one process discover their ports at once.
  std::atomic<bool> active{true};
  bool ethernet = true;
  uint16_t lid = 0;
  uint64_t guid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  int gidTableLength = 0;
  std::vector<FakeGid> gids;  // index = position; a zero GID is an unconfigured entry
};

struct FakeContext {
  ibv_context context{};
  FakeDevice* device = nullptr;
};

struct FakeMr {
  ibv_mr mr{};
  int access = 0;
  // A dmabuf registration: the MR's addresses are the caller's iova, its bytes those of the fd's
  // mapping (`mapping` holds `mr.addr`'s byte; the whole mmap starts `mapSlack` bytes before it).
  char* mapping = nullptr;
  size_t mapSlack = 0;
  // Where the byte at `address` (inside the MR) lives in this process.
  char* bytesAt(uint64_t address) const {
    if (!mapping) return reinterpret_cast<char*>(address);
    return mapping + (address - reinterpret_cast<uintptr_t>(mr.addr));
  }
};

struct FakeCq;

struct FakeChannel {
  ibv_comp_channel channel{};
  int writeFd = -1;
  std::deque<FakeCq*> events;
};

struct FakeCq {
  ibv_cq cq{};
  std::deque<ibv_wc> entries;
  int capacity = 0;
  bool armed = false;
  bool overrun = false;
  FakeChannel* channel = nullptr;
  unsigned eventsDelivered = 0, eventsAcked = 0;
};

// One RDMA write (with or without immediate) or read on its way to the responder QP, in order.
struct InFlight {
  uint32_t fromQp = 0;
  uint64_t wrId = 0;
  ibv_wr_opcode opcode = IBV_WR_RDMA_WRITE;
  bool signaled = false;
  std::vector<ibv_sge> sges;
  uint64_t remoteAddress = 0;
  uint32_t rkey = 0;
  uint32_t immediate = 0;
};

struct FakeQp {
  ibv_qp qp{};
  uint8_t port = 0;
  uint32_t remoteQp = 0;
  ibv_mtu pathMtu = IBV_MTU_256;
  int rnrRetry = 0;
  bool signalAll = false;
  std::deque<uint64_t> receives;  // posted receive wr_ids
  std::deque<InFlight> incoming;  // writes to this QP waiting for a receive (RNR) or behind one
};

struct Faults {
  int retryExceeded = 0;  // the next sends complete with IBV_WC_RETRY_EXC_ERR
  int rnrExceeded = 0;    // ... with IBV_WC_RNR_RETRY_EXC_ERR
  int regMrNoMemory = 0;  // the next ibv_reg_mr calls fail with ENOMEM
  int modifyToRtrInvalid = 0;  // the next modifications to RTR fail with EINVAL
  int dmabufUnsupported = 0;   // the next ibv_reg_dmabuf_mr calls fail with EOPNOTSUPP
};

struct Fabric {
  std::mutex lock;
  std::map<std::string, FakeDevice*> devices;  // never freed: device pointers outlive lists
  std::map<uint32_t, FakeQp*> qps;
  std::map<uint32_t, FakeMr*> mrs;  // by key (lkey == rkey)
  uint32_t nextQp = 0x100, nextKey = 0x1000;
  long live = 0;  // contexts, PDs, MRs, channels, CQs, QPs not yet destroyed
  Faults faults;
};

Fabric& fabric();

// The data path, reached through ibv_context::ops as the header's inline functions call it.
int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int pollCq(ibv_cq* cq, int entries, ibv_wc* wc);
int requestNotify(ibv_cq* cq, int solicitedOnly);

}  // namespace fakeverbs
