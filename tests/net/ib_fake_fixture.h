// The fixture of the ib provider's tests over FakeVerbs (fake_verbs/README.md): the fake's control
// API, providers made over it, connect/accept driven together, one message through a connection, and
// a check at the end that every verbs object a test made was given back. Every wait is bounded.
#pragma once

#include <gtest/gtest.h>
#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <vector>

#include "base/clock.h"
#include "transport/net/ib/ib_provider.h"
#include "transport/net/provider.h"
#include "verbs_choice.h"

namespace loom::net {

// The fake's control API, from the very library the provider loaded.
struct FakeControl {
  int (*inject)(const char*, int) = nullptr;
  void (*reset)() = nullptr;
  long (*live)() = nullptr;
};

class IbOverFakeVerbs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (fakeVerbsPath().empty()) GTEST_SKIP() << "LOOM_TEST_FAKE_VERBS is not set (run through meson test)";
    void* lib = dlopen(fakeVerbsPath().c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    fake_.inject = reinterpret_cast<int (*)(const char*, int)>(dlsym(lib, "fake_verbs_inject"));
    fake_.reset = reinterpret_cast<void (*)()>(dlsym(lib, "fake_verbs_reset"));
    fake_.live = reinterpret_cast<long (*)()>(dlsym(lib, "fake_verbs_live_objects"));
    ASSERT_TRUE(fake_.inject && fake_.reset && fake_.live);
    fake_.reset();
    liveBefore_ = fake_.live();
  }
  void TearDown() override {
    if (!fake_.reset) return;
    fake_.reset();
    // Whatever a test made, closing it gave every verbs object back.
    EXPECT_EQ(fake_.live(), liveBefore_) << "verbs objects left behind";
  }

  Status make(std::unique_ptr<Provider>* out) {
    ScopedEnv lib("LOOM_IBVERBS_LIB", fakeVerbsPath());
    return ib::IbProvider::create("lo", out);
  }

  // Drives connect and accept together for at most 10 s; the first error of either ends it.
  static Status connect(Provider& sender, Provider& receiver, int device, std::unique_ptr<SendComm>* send,
                        std::unique_ptr<RecvComm>* recv, Status* acceptStatus = nullptr) {
    Handle handle;
    std::unique_ptr<ListenComm> listen;
    LOOM_TRY(receiver.listen(device, &handle, &listen));
    Status connectStatus, accepted;
    const Deadline deadline = Deadline::afterMs(10000);
    bool connectOver = false, acceptOver = false;
    while (!(connectOver && acceptOver) && !deadline.expired()) {
      if (!connectOver) {
        connectStatus = sender.connect(device, &handle, send);
        connectOver = !connectStatus.ok() || *send;
      }
      if (!acceptOver) {
        accepted = listen->accept(recv);
        acceptOver = !accepted.ok() || *recv;
      }
      if (!connectStatus.ok() && (!acceptStatus || acceptOver)) break;
    }
    if (acceptStatus) *acceptStatus = accepted;
    if (!connectStatus.ok()) return connectStatus;
    if (!accepted.ok()) return accepted;
    if (!*send || !*recv) return Status(loomTimeout, "connect/accept did not finish in 10 s");
    return Status::Ok();
  }

  // One message of `bytes` through (send, recv); the first error of either side, within 10 s. `fault`
  // is injected after the receive (and its clearance) went out, before the send: it hits the data.
  Status transfer(SendComm& send, RecvComm& recv, size_t bytes, size_t capacity, const char* fault = nullptr,
                  bool* sendDone = nullptr) {
    std::vector<char> out(bytes, 'x'), in(capacity, 0);
    MemoryRegion* sr = nullptr;
    MemoryRegion* rr = nullptr;
    LOOM_TRY(send.registerMemory(out.data(), out.size(), kHostPointers, &sr));
    LOOM_TRY(recv.registerMemory(in.data(), in.size(), kHostPointers, &rr));
    void* data = in.data();
    const int tag = 0;
    Request* r = nullptr;
    Request* s = nullptr;
    Status st = recv.irecv(1, &data, &capacity, &tag, &rr, &r);
    if (fault && fake_.inject(fault, 1) != 0) st = internalError("unknown fault {}", fault);
    if (st.ok()) st = send.isend(out.data(), bytes, tag, sr, &s);
    if (st.ok() && (!r || !s)) st = internalError("a request was refused");
    bool sent = false, received = false;
    const Deadline deadline = Deadline::afterMs(10000);
    while (st.ok() && !(sent && received) && !deadline.expired()) {
      if (!sent) st = send.test(s, &sent, nullptr);
      if (st.ok() && !received) st = recv.test(r, &received, nullptr);
    }
    if (st.ok() && !(sent && received)) st = Status(loomTimeout, "the message did not arrive in 10 s");
    if (st.ok() && bytes > 0 && std::memcmp(out.data(), in.data(), bytes) != 0) st = internalError("the message arrived altered");
    if (sendDone) *sendDone = sent;
    (void)send.deregisterMemory(sr);
    (void)recv.deregisterMemory(rr);
    return st;
  }

  FakeControl fake_;
  long liveBefore_ = 0;
};

}  // namespace loom::net
