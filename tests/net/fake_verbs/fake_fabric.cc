// FakeVerbs' completion channels, CQs and reliable-connection QPs, and the fabric between them: an RDMA
// write is a memcpy into the responder's memory after the checks a NIC makes (QP states, the local
// lkeys and the remote rkey, access rights, bounds, one protection domain); a write with immediate
// also takes a posted receive of the responder and completes it; an RDMA read copies the other way
// (REMOTE_READ there, LOCAL_WRITE here). A QP connected to itself (the provider's flush QP) works. Writes reach a QP in posting order;
// one that finds no receive waits for one (RNR) when the requester's rnr_retry is 7, else fails with
// IBV_WC_RNR_RETRY_EXC_ERR. A QP that cannot be reached (gone, not connected back, in error) fails
// the write with IBV_WC_RETRY_EXC_ERR at once, where a NIC would after its retries. A failed QP
// flushes what it holds (IBV_WC_WR_FLUSH_ERR).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fake_verbs.h"

#undef ibv_reg_mr

namespace fakeverbs {

namespace {

void complete(FakeCq* cq, const ibv_wc& wc) {
  if (static_cast<int>(cq->entries.size()) >= cq->capacity) {
    cq->overrun = true;  // a NIC raises IBV_EVENT_CQ_ERR; polling it then fails
    return;
  }
  cq->entries.push_back(wc);
  if (cq->armed && cq->channel) {
    cq->armed = false;
    cq->channel->events.push_back(cq);
    const char byte = 1;
    (void)!write(cq->channel->writeFd, &byte, 1);
  }
}

ibv_wc completion(uint64_t wrId, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t qp) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = status;
  wc.opcode = opcode;
  wc.qp_num = qp;
  wc.vendor_err = status == IBV_WC_SUCCESS ? 0 : 0x81;
  return wc;
}

FakeQp* findQp(Fabric& f, uint32_t number) {
  auto it = f.qps.find(number);
  return it == f.qps.end() ? nullptr : it->second;
}

void toError(Fabric& f, FakeQp* qp);

// The requester's side of a write that failed: an error completion (signaled or not) and its QP in error.
void failWrite(Fabric& f, FakeQp* requester, const InFlight& w, ibv_wc_status status) {
  complete(reinterpret_cast<FakeCq*>(requester->qp.send_cq),
           completion(w.wrId, status, IBV_WC_RDMA_WRITE, requester->qp.qp_num));
  toError(f, requester);
}

void toError(Fabric& f, FakeQp* qp) {
  if (qp->qp.state == IBV_QPS_ERR) return;
  qp->qp.state = IBV_QPS_ERR;
  auto* recvCq = reinterpret_cast<FakeCq*>(qp->qp.recv_cq);
  for (uint64_t id : qp->receives) complete(recvCq, completion(id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qp.qp_num));
  qp->receives.clear();
  // Writes of this QP still waiting at a responder are flushed too.
  for (auto& [number, other] : f.qps) {
    auto& in = other->incoming;
    for (auto it = in.begin(); it != in.end();) {
      if (it->fromQp != qp->qp.qp_num) {
        ++it;
        continue;
      }
      complete(reinterpret_cast<FakeCq*>(qp->qp.send_cq),
               completion(it->wrId, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, qp->qp.qp_num));
      it = in.erase(it);
    }
  }
}

bool inside(const FakeMr* m, uint64_t address, uint64_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(m->mr.addr);
  return address >= start && address + bytes <= start + m->mr.length;
}

// Delivers the writes waiting at `responder` in order, as far as receives allow.
void deliver(Fabric& f, FakeQp* responder) {
  while (!responder->incoming.empty()) {
    InFlight w = responder->incoming.front();
    FakeQp* requester = findQp(f, w.fromQp);
    if (!requester) {  // destroyed meanwhile: its writes went with it
      responder->incoming.pop_front();
      continue;
    }
    const bool withImmediate = w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (withImmediate && responder->receives.empty()) {
      if (requester->rnrRetry == 7) return;  // retried without end until a receive is posted
      responder->incoming.pop_front();
      failWrite(f, requester, w, IBV_WC_RNR_RETRY_EXC_ERR);
      continue;
    }
    responder->incoming.pop_front();
    const bool read = w.opcode == IBV_WR_RDMA_READ;
    // The requester's side: the bytes a write reads, or where a read's bytes go (which needs LOCAL_WRITE).
    uint64_t total = 0;
    bool localOk = true;
    std::vector<char*> local;
    for (const ibv_sge& s : w.sges) {
      auto it = f.mrs.find(s.lkey);
      localOk = localOk && it != f.mrs.end() && it->second->mr.pd == requester->qp.pd &&
                inside(it->second, s.addr, s.length) && (!read || (it->second->access & IBV_ACCESS_LOCAL_WRITE));
      if (localOk) local.push_back(it->second->bytesAt(s.addr));
      total += s.length;
    }
    if (!localOk) {
      failWrite(f, requester, w, IBV_WC_LOC_PROT_ERR);
      continue;
    }
    if (total > 0) {
      const int right = read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
      auto it = f.mrs.find(w.rkey);
      if (it == f.mrs.end() || it->second->mr.pd != responder->qp.pd || !(it->second->access & right) ||
          !inside(it->second, w.remoteAddress, total)) {
        failWrite(f, requester, w, IBV_WC_REM_ACCESS_ERR);
        continue;
      }
      char* remote = it->second->bytesAt(w.remoteAddress);
      for (size_t i = 0; i < w.sges.size(); ++i) {
        if (read) std::memmove(local[i], remote, w.sges[i].length);
        else std::memmove(remote, local[i], w.sges[i].length);
        remote += w.sges[i].length;
      }
    }
    if (read) {
      if (w.signaled)
        complete(reinterpret_cast<FakeCq*>(requester->qp.send_cq),
                 completion(w.wrId, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, requester->qp.qp_num));
      continue;
    }
    if (withImmediate) {
      ibv_wc wc = completion(responder->receives.front(), IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
                             responder->qp.qp_num);
      responder->receives.pop_front();
      wc.byte_len = static_cast<uint32_t>(total);
      wc.imm_data = w.immediate;
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.src_qp = requester->qp.qp_num;
      complete(reinterpret_cast<FakeCq*>(responder->qp.recv_cq), wc);
    }
    if (w.signaled)
      complete(reinterpret_cast<FakeCq*>(requester->qp.send_cq),
               completion(w.wrId, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, requester->qp.qp_num));
  }
}

}  // namespace

int postSend(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  auto* qp = reinterpret_cast<FakeQp*>(ibqp);
  for (; wr; wr = wr->next) {
    const bool supported = wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
                           wr->opcode == IBV_WR_RDMA_READ;
    if (!supported || (qp->qp.state != IBV_QPS_RTS && qp->qp.state != IBV_QPS_ERR) || wr->num_sge < 0 || wr->num_sge > 8) {
      *bad = wr;
      return EINVAL;
    }
    InFlight w;
    w.fromQp = qp->qp.qp_num;
    w.wrId = wr->wr_id;
    w.opcode = wr->opcode;
    w.signaled = (wr->send_flags & IBV_SEND_SIGNALED) || qp->signalAll;
    w.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
    w.remoteAddress = wr->wr.rdma.remote_addr;
    w.rkey = wr->wr.rdma.rkey;
    w.immediate = wr->imm_data;
    if (qp->qp.state == IBV_QPS_ERR) {
      complete(reinterpret_cast<FakeCq*>(qp->qp.send_cq),
               completion(w.wrId, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, qp->qp.qp_num));
      continue;
    }
    if (f.faults.retryExceeded > 0 || f.faults.rnrExceeded > 0) {
      const bool retry = f.faults.retryExceeded > 0;
      --(retry ? f.faults.retryExceeded : f.faults.rnrExceeded);
      failWrite(f, qp, w, retry ? IBV_WC_RETRY_EXC_ERR : IBV_WC_RNR_RETRY_EXC_ERR);
      continue;
    }
    FakeQp* responder = findQp(f, qp->remoteQp);
    if (!responder || responder->remoteQp != qp->qp.qp_num ||
        (responder->qp.state != IBV_QPS_RTR && responder->qp.state != IBV_QPS_RTS)) {
      failWrite(f, qp, w, IBV_WC_RETRY_EXC_ERR);
      continue;
    }
    responder->incoming.push_back(std::move(w));
    deliver(f, responder);
  }
  return 0;
}

int postRecv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  auto* qp = reinterpret_cast<FakeQp*>(ibqp);
  for (; wr; wr = wr->next) {
    if (qp->qp.state == IBV_QPS_RESET || wr->num_sge > 1) {
      *bad = wr;
      return EINVAL;
    }
    if (qp->qp.state == IBV_QPS_ERR) {
      complete(reinterpret_cast<FakeCq*>(qp->qp.recv_cq),
               completion(wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qp.qp_num));
      continue;
    }
    qp->receives.push_back(wr->wr_id);
  }
  deliver(f, qp);
  return 0;
}

int pollCq(ibv_cq* ibcq, int entries, ibv_wc* wc) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  auto* cq = reinterpret_cast<FakeCq*>(ibcq);
  if (cq->overrun) return -1;
  int n = 0;
  for (; n < entries && !cq->entries.empty(); ++n) {
    wc[n] = cq->entries.front();
    cq->entries.pop_front();
  }
  return n;
}

int requestNotify(ibv_cq* ibcq, int solicitedOnly) {
  (void)solicitedOnly;
  std::lock_guard<std::mutex> guard(fabric().lock);
  reinterpret_cast<FakeCq*>(ibcq)->armed = true;
  return 0;
}

}  // namespace fakeverbs

using namespace fakeverbs;

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  auto* c = new FakeChannel();
  c->channel.context = context;
  c->channel.fd = fds[0];
  c->writeFd = fds[1];
  std::lock_guard<std::mutex> guard(fabric().lock);
  ++fabric().live;
  return &c->channel;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  auto* c = reinterpret_cast<FakeChannel*>(channel);
  close(c->channel.fd);
  close(c->writeFd);
  delete c;
  std::lock_guard<std::mutex> guard(fabric().lock);
  --fabric().live;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel, int vector) {
  (void)vector;
  if (cqe <= 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* cq = new FakeCq();
  cq->cq.context = context;
  cq->cq.channel = channel;
  cq->cq.cq_context = cqContext;
  cq->cq.cqe = cqe;
  cq->capacity = cqe;
  cq->channel = reinterpret_cast<FakeChannel*>(channel);
  std::lock_guard<std::mutex> guard(fabric().lock);
  ++fabric().live;
  return &cq->cq;
}

int ibv_destroy_cq(ibv_cq* ibcq) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  auto* cq = reinterpret_cast<FakeCq*>(ibcq);
  // libibverbs waits here until every event was acknowledged: a missing ibv_ack_cq_events hangs a
  // real program, so the fake refuses instead.
  if (cq->eventsAcked != cq->eventsDelivered) return EBUSY;
  for (auto& [number, qp] : f.qps)
    if (qp->qp.send_cq == ibcq || qp->qp.recv_cq == ibcq) return EBUSY;
  if (cq->channel) {
    auto& events = cq->channel->events;
    events.erase(std::remove(events.begin(), events.end(), cq), events.end());
  }
  delete cq;
  --f.live;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext) {
  char byte;
  if (read(channel->fd, &byte, 1) != 1) return -1;  // EAGAIN on a non-blocking channel without events
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  auto& events = reinterpret_cast<FakeChannel*>(channel)->events;
  if (events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  FakeCq* c = events.front();
  events.pop_front();
  ++c->eventsDelivered;
  *cq = &c->cq;
  *cqContext = c->cq.cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int count) {
  std::lock_guard<std::mutex> guard(fabric().lock);
  reinterpret_cast<FakeCq*>(cq)->eventsAcked += count;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (init->qp_type != IBV_QPT_RC || !init->send_cq || !init->recv_cq || init->srq) {
    errno = EINVAL;
    return nullptr;
  }
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  auto* qp = new FakeQp();
  qp->qp.context = pd->context;
  qp->qp.pd = pd;
  qp->qp.send_cq = init->send_cq;
  qp->qp.recv_cq = init->recv_cq;
  qp->qp.qp_context = init->qp_context;
  qp->qp.qp_type = init->qp_type;
  qp->qp.state = IBV_QPS_RESET;
  qp->signalAll = init->sq_sig_all != 0;
  qp->qp.qp_num = f.nextQp++;
  f.qps[qp->qp.qp_num] = qp;
  ++f.live;
  return &qp->qp;
}

int ibv_modify_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  auto* qp = reinterpret_cast<FakeQp*>(ibqp);
  const FakeDevice& device = *reinterpret_cast<FakeContext*>(qp->qp.context)->device;
  auto has = [&](int bits) { return (mask & bits) == bits; };
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  const ibv_qp_state from = qp->qp.state, to = attr->qp_state;
  if (to == IBV_QPS_ERR) {
    toError(f, qp);
    return 0;
  }
  if (to == IBV_QPS_RESET) {
    qp->qp.state = IBV_QPS_RESET;
    qp->receives.clear();
    qp->remoteQp = 0;
    return 0;
  }
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    if (!has(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) || attr->port_num != 1 || attr->pkey_index != 0)
      return EINVAL;
    qp->port = attr->port_num;
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    if (f.faults.modifyToRtrInvalid > 0) {
      --f.faults.modifyToRtrInvalid;
      return EINVAL;
    }
    if (!has(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
             IBV_QP_MIN_RNR_TIMER))
      return EINVAL;
    if (attr->path_mtu > device.mtu || attr->ah_attr.port_num != qp->port) return EINVAL;
    if (device.ethernet) {
      // RoCE addresses by GID: the source index must hold one, and the destination must be one.
      const int index = attr->ah_attr.grh.sgid_index;
      static const uint8_t zero[16] = {};
      if (!attr->ah_attr.is_global || index >= static_cast<int>(device.gids.size()) ||
          std::memcmp(attr->ah_attr.grh.dgid.raw, zero, 16) == 0)
        return EINVAL;
    } else if (attr->ah_attr.dlid == 0) {
      return EINVAL;
    }
    qp->remoteQp = attr->dest_qp_num;
    qp->pathMtu = attr->path_mtu;
  } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    if (!has(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) ||
        attr->timeout > 31 || attr->retry_cnt > 7 || attr->rnr_retry > 7)
      return EINVAL;
    qp->rnrRetry = attr->rnr_retry;
  } else {
    return EINVAL;
  }
  qp->qp.state = to;
  return 0;
}

int ibv_destroy_qp(ibv_qp* ibqp) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  auto* qp = reinterpret_cast<FakeQp*>(ibqp);
  f.qps.erase(qp->qp.qp_num);
  for (auto& [number, other] : f.qps) {
    auto& in = other->incoming;
    in.erase(std::remove_if(in.begin(), in.end(), [&](const InFlight& w) { return w.fromQp == qp->qp.qp_num; }),
             in.end());
  }
  delete qp;
  --f.live;
  return 0;
}

}  // extern "C"
