// The ib provider and GPU memory, over FakeVerbs (a test double: fake_verbs/README.md): nvidia-peermem
// found by its sysfs marks, the dmabuf probe, dmabuf registration, and the flush read after a receive
// into GPU memory, through a QP connected to itself. The fake's "dmabuf" is a memfd: what the fabric
// writes through the registration lands where the test's own mapping of the fd sees it, as a GPU's
// memory is where the NIC writes it. No GPU is involved; the real NIC side needs hardware (the
// issue's GPU machine has no NIC) and the CUDA side's export is tested on a GPU (tests/gpu).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ib_fake_fixture.h"
#include "text_checks.h"
#include "transport/net/ib/gpu_memory_support.h"
#include "transport/net/ib/ib_comms.h"
#include "transport/net/ib/ib_devices.h"
#include "transport/net/ib/ib_endpoint.h"

namespace loom::net {
namespace {

TEST(IbGpuMemory, PeermemIsFoundByItsSysfsMarks) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / fmt::format("loom-peermem-{}", getpid());
  fs::remove_all(root);
  fs::create_directories(root);
  std::string which;
  EXPECT_FALSE(ib::peermemLoaded(root.string(), &which));
  for (const char* mark : {"sys/kernel/mm/memory_peers/nv_mem/version", "sys/module/nvidia_peermem/version"}) {
    fs::create_directories((root / mark).parent_path());
    std::ofstream(root / mark) << "1.0\n";
    EXPECT_TRUE(ib::peermemLoaded(root.string(), &which)) << mark;
    EXPECT_EQ(which, std::string("/") + mark);
    fs::remove_all(root / "sys");
  }
  fs::remove_all(root);
}

// A memfd standing for a GPU allocation exported as a dmabuf, with the test's own view of it.
struct FakeDmabuf {
  explicit FakeDmabuf(size_t bytes) : bytes(bytes) {
    fd = memfd_create("loom-fake-dmabuf", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) == 0)
      view = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  }
  ~FakeDmabuf() {
    if (view && view != MAP_FAILED) munmap(view, bytes);
    if (fd >= 0) close(fd);
  }
  bool ok() const { return fd >= 0 && view && view != MAP_FAILED; }
  size_t bytes;
  int fd = -1;
  char* view = nullptr;
};

class IbGpuMemoryOverFakeVerbs : public IbOverFakeVerbs {
 protected:
  // The default fake devices: fakeroce0, fakeib0 and fakedown0, each probed once when opened.
  static constexpr int kDevices = 3;

  // A provider over the fake and one connection of it to itself (send_, recv_), closed before the
  // check that every verbs object was given back.
  void connectPair() {
    ASSERT_TRUE(make(&provider_).ok());
    ASSERT_TRUE(connect(*provider_, *provider_, 0, &send_, &recv_).ok());
  }
  void TearDown() override {
    send_.reset();
    recv_.reset();
    provider_.reset();
    IbOverFakeVerbs::TearDown();
  }

  // One message of `bytes` from host memory into `into` (registered as `region`), then its flush;
  // *flushed says whether a flush was needed.
  Status receiveAndFlush(SendComm& send, RecvComm& recv, char* into, MemoryRegion* region, size_t bytes,
                         bool* flushed) {
    std::vector<char> out(bytes);
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>('a' + i % 26);
    MemoryRegion* sr = nullptr;
    LOOM_TRY(send.registerMemory(out.data(), out.size(), kHostPointers, &sr));
    void* data = into;
    const int tag = 0;
    Request* r = nullptr;
    Request* s = nullptr;
    LOOM_TRY(recv.irecv(1, &data, &bytes, &tag, &region, &r));
    LOOM_TRY(send.isend(out.data(), bytes, tag, sr, &s));
    bool sent = false, received = false;
    const Deadline deadline = Deadline::afterMs(10000);
    while (!(sent && received) && !deadline.expired()) {
      if (!sent) LOOM_TRY(send.test(s, &sent, nullptr));
      if (!received) LOOM_TRY(recv.test(r, &received, nullptr));
    }
    if (!(sent && received)) return Status(loomTimeout, "the message did not arrive in 10 s");
    if (bytes > 0 && std::memcmp(out.data(), into, bytes) != 0) return internalError("the message arrived altered");
    Request* f = nullptr;
    LOOM_TRY(recv.iflush(1, &data, &bytes, &region, &f));
    *flushed = f != nullptr;
    bool done = !f;
    while (!done && !deadline.expired()) LOOM_TRY(recv.test(f, &done, nullptr));
    (void)send.deregisterMemory(sr);
    return done ? Status::Ok() : Status(loomTimeout, "the flush did not complete in 10 s");
  }

  std::unique_ptr<Provider> provider_;
  std::unique_ptr<SendComm> send_;
  std::unique_ptr<RecvComm> recv_;
};

TEST_F(IbGpuMemoryOverFakeVerbs, ProbedSupportShowsInThePointerKinds) {
  std::string mark;
  const bool peermem = ib::peermemLoaded("/", &mark);  // this machine's (never loaded in CI)
  std::unique_ptr<Provider> p;
  ASSERT_TRUE(make(&p).ok());
  DeviceProperties props;
  ASSERT_TRUE(p->deviceProperties(0, &props).ok());
  EXPECT_EQ(props.ptrSupport, kHostPointers | kDmabufPointers | (peermem ? kCudaPointers : 0));
  p.reset();
  // A kernel or NIC driver without dmabuf: the probe's EOPNOTSUPP.
  ASSERT_EQ(fake_.inject("reg_dmabuf_eopnotsupp", kDevices), 0);
  ASSERT_TRUE(make(&p).ok());
  ASSERT_TRUE(p->deviceProperties(0, &props).ok());
  EXPECT_EQ(props.ptrSupport & kDmabufPointers, 0);
  p.reset();
  ScopedEnv off("LOOM_DMABUF_ENABLE", "0");
  ASSERT_TRUE(make(&p).ok());
  ASSERT_TRUE(p->deviceProperties(0, &props).ok());
  EXPECT_EQ(props.ptrSupport & kDmabufPointers, 0);
}

TEST_F(IbGpuMemoryOverFakeVerbs, DmabufMemoryReceivesAndIsFlushedThroughALoopbackRead) {
  connectPair();
  SendComm* send = send_.get();
  RecvComm* recv = recv_.get();
  FakeDmabuf gpu(1 << 20);
  ASSERT_TRUE(gpu.ok());
  // The registration covers the allocation's second half; the buffer starts 100 bytes into it.
  const size_t half = gpu.bytes / 2;
  MemoryRegion* region = nullptr;
  ASSERT_TRUE(recv->registerDmabuf(gpu.view + half, half, gpu.fd, half, &region).ok());
  // A sub-range of it is the same registration (the cache), found by address.
  MemoryRegion* inner = nullptr;
  const long live = fake_.live();
  ASSERT_TRUE(recv->registerDmabuf(gpu.view + half + 4096, 100, gpu.fd, half + 4096, &inner).ok());
  EXPECT_EQ(inner, region);
  EXPECT_EQ(fake_.live(), live);
  EXPECT_TRUE(recv->deregisterMemory(inner).ok());
  auto* ibRecv = dynamic_cast<ib::IbRecvComm*>(recv);
  ASSERT_NE(ibRecv, nullptr);
  EXPECT_FALSE(ibRecv->flushQpMade());
  bool flushed = false;
  Status st = receiveAndFlush(*send, *recv, gpu.view + half + 100, region, 70000, &flushed);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(flushed) << "a receive into GPU memory is flushed";
  EXPECT_TRUE(ibRecv->flushQpMade());
  // Twice: the flush QP is kept, one flush at a time.
  st = receiveAndFlush(*send, *recv, gpu.view + half, region, 4096, &flushed);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(flushed);
  EXPECT_TRUE(recv->deregisterMemory(region).ok());
  // Host memory needs no flush.
  std::vector<char> host(8192);
  MemoryRegion* hostRegion = nullptr;
  ASSERT_TRUE(recv->registerMemory(host.data(), host.size(), kHostPointers, &hostRegion).ok());
  st = receiveAndFlush(*send, *recv, host.data(), hostRegion, host.size(), &flushed);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE(flushed);
  EXPECT_TRUE(recv->deregisterMemory(hostRegion).ok());
}

TEST_F(IbGpuMemoryOverFakeVerbs, FlushCanBeTurnedOff) {
  ScopedEnv off("LOOM_GDR_FLUSH_DISABLE", "1");
  connectPair();
  SendComm* send = send_.get();
  RecvComm* recv = recv_.get();
  FakeDmabuf gpu(1 << 16);
  ASSERT_TRUE(gpu.ok());
  MemoryRegion* region = nullptr;
  ASSERT_TRUE(recv->registerDmabuf(gpu.view, gpu.bytes, gpu.fd, 0, &region).ok());
  bool flushed = true;
  const Status st = receiveAndFlush(*send, *recv, gpu.view, region, 1000, &flushed);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE(flushed);
  EXPECT_FALSE(dynamic_cast<ib::IbRecvComm*>(recv)->flushQpMade());
  EXPECT_TRUE(recv->deregisterMemory(region).ok());
}

TEST_F(IbGpuMemoryOverFakeVerbs, GpuMemoryTheDeviceCannotTakeIsRefusedWithTheReason) {
  std::string mark;
  if (ib::peermemLoaded("/", &mark)) GTEST_SKIP() << "nvidia-peermem is loaded here (" << mark << ")";
  ASSERT_EQ(fake_.inject("reg_dmabuf_eopnotsupp", kDevices), 0);
  connectPair();
  RecvComm* recv = recv_.get();
  std::vector<char> buffer(4096);
  MemoryRegion* region = nullptr;
  Status st = recv->registerMemory(buffer.data(), buffer.size(), kCudaPointers, &region);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  expectWords(st.message(), {"fakeroce0", "nvidia-peermem", "dmabuf"});
  st = recv->registerDmabuf(buffer.data(), buffer.size(), 0, 0, &region);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  expectWords(st.message(), {"does not register dmabuf", "Operation not supported"});
}

TEST_F(IbGpuMemoryOverFakeVerbs, DmabufRegistrationErrorsSayWhy) {
  connectPair();
  RecvComm* recv = recv_.get();
  FakeDmabuf gpu(1 << 16);
  ASSERT_TRUE(gpu.ok());
  MemoryRegion* region = nullptr;
  // The address is 100 bytes into a page but the fd offset says it is the fd's first byte.
  Status st = recv->registerDmabuf(gpu.view + 100, 1000, gpu.fd, 0, &region);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  expectWords(st.message(), {"export whole pages"});
  // An fd that is not one: the registration's own error.
  st = recv->registerDmabuf(gpu.view, 1000, 1 << 20, 0, &region);
  EXPECT_EQ(st.code(), loomSystemError);
  expectWords(st.message(), {"ibv_reg_dmabuf_mr", "Bad file descriptor"});
}

// The flush's mechanism on its own, over FakeVerbs and, in the Soft-RoCE VM (`*/ib_verbs`), over real
// verbs, where GPU memory cannot be registered (no nvidia-peermem, and Soft-RoCE takes no dmabufs):
// a QP connected to itself reads registered memory into registered memory, as iflush does. Also
// prints what the device takes of GPU memory (the probe's answer).
class IbFlushMechanism : public ::testing::TestWithParam<std::string> {};

TEST_P(IbFlushMechanism, LoopbackQpReadsRegisteredMemory) {
  const bool real = GetParam() == "ib_verbs";
  if (real && !realVerbsRequested()) GTEST_SKIP() << "real verbs run in the Soft-RoCE VM (LOOM_TEST_REAL_VERBS=1)";
  if (!real && fakeVerbsPath().empty()) GTEST_SKIP() << "LOOM_TEST_FAKE_VERBS is not set (run through meson test)";
  ScopedEnv lib("LOOM_IBVERBS_LIB", real ? std::nullopt : std::optional<std::string>(fakeVerbsPath()));
  std::shared_ptr<const ib::VerbsApi> api;
  ASSERT_TRUE(ib::loadVerbs(&api).ok());
  ib::IbConfig config;
  ASSERT_TRUE(ib::readIbConfig(&config).ok());
  std::vector<ib::IbPort> ports;
  std::string report;
  ASSERT_TRUE(ib::discoverPorts(api, config, &ports, &report).ok());
  ASSERT_FALSE(ports.empty()) << report;
  ib::IbDevice& device = *ports[0].device;
  std::printf("%s: GPU memory: %s\n", device.name().c_str(), device.gpuMemory().why.c_str());
  std::unique_ptr<ib::IbEndpoint> endpoint, loop;
  ASSERT_TRUE(ib::IbEndpoint::create(ports[0], config, 1, &endpoint).ok());
  Status st = endpoint->createLoopback(&loop);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<char> source(8192), target(64, 0);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<char>(i * 7 + 1);
  ib::Registration* from = nullptr;
  ib::Registration* to = nullptr;
  ASSERT_TRUE(device.registry().acquire(source.data(), source.size(), &from).ok());
  ASSERT_TRUE(device.registry().acquire(target.data(), target.size(), &to).ok());
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(target.data());
  sge.length = static_cast<uint32_t>(target.size());
  sge.lkey = to->lkey();
  ibv_send_wr wr{};
  wr.wr_id = 77;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(source.data() + 4000);
  wr.wr.rdma.rkey = from->rkey();
  ASSERT_TRUE(loop->postSend(0, &wr, "a loopback read").ok());
  bool done = false;
  ibv_wc_status status = IBV_WC_SUCCESS;
  const Deadline deadline = Deadline::afterMs(10000);
  while (!done && !deadline.expired()) {
    st = loop->drain([&](const ibv_wc& wc) {
      done = wc.wr_id == 77;
      status = wc.status;
      return Status::Ok();
    });
    ASSERT_TRUE(st.ok()) << st.message();
  }
  ASSERT_TRUE(done) << "the read did not complete in 10 s";
  EXPECT_EQ(status, IBV_WC_SUCCESS) << api->wcStatusStr(status);
  EXPECT_EQ(std::memcmp(target.data(), source.data() + 4000, target.size()), 0);
  device.registry().release(from);
  device.registry().release(to);
}

INSTANTIATE_TEST_SUITE_P(Libraries, IbFlushMechanism, ::testing::Values("ib_fake_verbs", "ib_verbs"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace loom::net
