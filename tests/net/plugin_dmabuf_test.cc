// Dmabuf registration through NCCL net plugins. Loading side: the plugin provider hands a dmabuf to a
// plugin's regMrDmaBuf as NCCL does (NCCL_PTR_CUDA, the fd and offset as given) only when the table
// has one and the device reports NCCL_PTR_DMABUF, its handle is released by deregMr, and otherwise
// the error names the plugin and what is missing. Checked over FakeNetPlugin, a test double of a
// plugin (v8 and v12 tables), that records what it is given. Exporting side: Loom's socket provider
// built as a plugin forwards regMrDmaBuf to the provider, whose refusal reaches the caller.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "base/clock.h"
#include "plugin_files.h"
#include "text_checks.h"
#include "transport/net/plugin/plugin_abi.h"
#include "transport/net/plugin/plugin_loader.h"
#include "transport/net/plugin/plugin_provider.h"

namespace loom::net {
namespace {

namespace abi = plugin::abi;

// FakeNetPlugin: a test double of an NCCL net plugin in this process; its tables go straight to
// adaptPlugin, as the loader's dlsym result would. One device, whose ptrSupport a test sets; comms
// and memory handles are tokens (only their addresses matter); regMrDmaBuf and deregMr record their
// arguments.
namespace fake_net_plugin {

struct DmabufRegistration {
  void* comm;
  void* data;
  size_t size;
  int type;
  uint64_t offset;
  int fd;
};
struct Deregistration {
  void* comm;
  void* mhandle;
};

int ptrSupport = abi::kPtrHost;
std::vector<DmabufRegistration> dmabufRegistrations;
std::vector<Deregistration> deregistrations;
char sendComm, recvComm, listenComm, memoryHandle;
char deviceName[] = "fake0";

abi::Result initV8(abi::Logger) { return abi::kSuccess; }
abi::Result initV12(void** ctx, uint64_t, abi::CommConfig*, abi::Logger, abi::ProfilerCallback) {
  *ctx = nullptr;
  return abi::kSuccess;
}
abi::Result devices(int* ndev) {
  *ndev = 1;
  return abi::kSuccess;
}
template <typename Props>
abi::Result getProperties(int dev, Props* props) {
  if (dev != 0) return abi::kInvalidArgument;
  *props = Props{};
  props->name = deviceName;
  props->ptrSupport = ptrSupport;
  props->maxComms = 1;
  props->maxRecvs = 1;
  return abi::kSuccess;
}
abi::Result listenV8(int, void*, void** comm) {
  *comm = &listenComm;
  return abi::kSuccess;
}
abi::Result listenV12(void*, int dev, void* handle, void** comm) { return listenV8(dev, handle, comm); }
abi::Result connectV8(int, void*, void** comm, abi::DeviceHandle**) {
  *comm = &sendComm;
  return abi::kSuccess;
}
abi::Result connectV12(void*, int dev, void* handle, void** comm, abi::DeviceHandle** deviceComm) {
  return connectV8(dev, handle, comm, deviceComm);
}
abi::Result accept(void*, void** comm, abi::DeviceHandle**) {
  *comm = &recvComm;
  return abi::kSuccess;
}
abi::Result regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  dmabufRegistrations.push_back({comm, data, size, type, offset, fd});
  *mhandle = &memoryHandle;
  return abi::kSuccess;
}
abi::Result deregMr(void* comm, void* mhandle) {
  deregistrations.push_back({comm, mhandle});
  return abi::kSuccess;
}
abi::Result close(void*) { return abi::kSuccess; }

// The entries both tables share; those a test never reaches (regMr, isend, ...) stay null.
template <typename Table>
Table withCommonEntries(Table t) {
  t.name = "fakenet";
  t.devices = devices;
  t.accept = accept;
  t.regMrDmaBuf = regMrDmaBuf;
  t.deregMr = deregMr;
  t.closeSend = t.closeRecv = t.closeListen = close;
  return t;
}
abi::NetV8 tableV8() {
  abi::NetV8 t{};
  t.init = initV8;
  t.getProperties = getProperties<abi::PropertiesV8>;
  t.listen = listenV8;
  t.connect = connectV8;
  return withCommonEntries(t);
}
abi::NetV12 tableV12() {
  abi::NetV12 t{};
  t.init = initV12;
  t.getProperties = getProperties<abi::PropertiesV12>;
  t.listen = listenV12;
  t.connect = connectV12;
  return withCommonEntries(t);
}

}  // namespace fake_net_plugin

namespace fake = fake_net_plugin;


// Parameter: the plugin table's version (8 or 12).
class PluginDmabuf : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    fake::dmabufRegistrations.clear();
    fake::deregistrations.clear();
  }

  // A provider over FakeNetPlugin whose device reports `ptrSupport`; regMrDmaBuf left NULL unless
  // `withRegMrDmaBuf`. Its comms: send_ (connect) and recv_ (listen + accept).
  Status start(int ptrSupport, bool withRegMrDmaBuf) {
    fake::ptrSupport = ptrSupport;
    v8_ = fake::tableV8();
    v12_ = fake::tableV12();
    if (!withRegMrDmaBuf) v8_.regMrDmaBuf = v12_.regMrDmaBuf = nullptr;
    plugin_.file = "fakenet (test double)";
    plugin_.version = GetParam();
    plugin_.calls = plugin::adaptPlugin(GetParam(), GetParam() == 8 ? static_cast<const void*>(&v8_) : &v12_);
    LOOM_TRY(plugin::makeProviderFrom(&plugin_, &provider_));
    Handle handle;
    std::unique_ptr<ListenComm> listen;
    LOOM_TRY(provider_->listen(0, &handle, &listen));
    LOOM_TRY(provider_->connect(0, &handle, &send_));
    return listen->accept(&recv_);
  }

  abi::NetV8 v8_{};
  abi::NetV12 v12_{};
  plugin::LoadedPlugin plugin_;  // before the provider and comms, which point into it
  std::unique_ptr<Provider> provider_;
  std::unique_ptr<SendComm> send_;
  std::unique_ptr<RecvComm> recv_;
};

TEST_P(PluginDmabuf, RegMrDmaBufGetsTheDmabufAsCudaMemoryAndDeregMrReleasesIt) {
  ASSERT_TRUE(start(abi::kPtrHost | abi::kPtrCuda | abi::kPtrDmabuf, true).ok());
  ASSERT_TRUE(send_ && recv_);
  void* gpuAddress = reinterpret_cast<void*>(uintptr_t{0x7f0000200000});  // never touched: no GPU here
  const size_t bytes = size_t{3} << 20;
  const int fd = 42;
  const uint64_t offset = 0x1000;
  const std::pair<Comm*, void*> comms[] = {{send_.get(), &fake::sendComm}, {recv_.get(), &fake::recvComm}};
  for (const auto& [comm, token] : comms) {
    fake::dmabufRegistrations.clear();
    fake::deregistrations.clear();
    MemoryRegion* region = nullptr;
    Status st = comm->registerDmabuf(gpuAddress, bytes, fd, offset, &region);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(fake::dmabufRegistrations.size(), 1u);
    const fake::DmabufRegistration& r = fake::dmabufRegistrations[0];
    EXPECT_EQ(r.comm, token);
    EXPECT_EQ(r.data, gpuAddress);
    EXPECT_EQ(r.size, bytes);
    EXPECT_EQ(r.type, abi::kPtrCuda);  // as NCCL passes it: the dmabuf is GPU memory
    EXPECT_EQ(r.offset, offset);
    EXPECT_EQ(r.fd, fd);
    EXPECT_EQ(static_cast<void*>(region), &fake::memoryHandle);
    ASSERT_TRUE(comm->deregisterMemory(region).ok());
    ASSERT_EQ(fake::deregistrations.size(), 1u);
    EXPECT_EQ(fake::deregistrations[0].comm, token);
    EXPECT_EQ(fake::deregistrations[0].mhandle, &fake::memoryHandle);
  }
}

TEST_P(PluginDmabuf, WithoutRegMrDmaBufTheErrorNamesThePluginAndTheNullEntry) {
  ASSERT_TRUE(start(abi::kPtrHost | abi::kPtrCuda | abi::kPtrDmabuf, false).ok());
  MemoryRegion* region = nullptr;
  Status st = send_->registerDmabuf(reinterpret_cast<void*>(uintptr_t{0x7f0000200000}), 4096, 42, 0, &region);
  EXPECT_EQ(st.code(), loomInvalidArgument) << st.message();
  const char* table = GetParam() == 8 ? "ncclNetPlugin_v8" : "ncclNetPlugin_v12";
  expectWords(st.message(), {"'fakenet'", "regMrDmaBuf NULL", table});
  EXPECT_TRUE(fake::dmabufRegistrations.empty());
}

TEST_P(PluginDmabuf, ADeviceWithoutDmabufSupportIsNeverAsked) {
  ASSERT_TRUE(start(abi::kPtrHost | abi::kPtrCuda, true).ok());
  MemoryRegion* region = nullptr;
  Status st = recv_->registerDmabuf(reinterpret_cast<void*>(uintptr_t{0x7f0000200000}), 4096, 42, 0, &region);
  EXPECT_EQ(st.code(), loomInvalidArgument) << st.message();
  expectWords(st.message(), {"'fakenet'", "device 0", "NCCL_PTR_DMABUF"});
  EXPECT_TRUE(fake::dmabufRegistrations.empty());
}

INSTANTIATE_TEST_SUITE_P(Tables, PluginDmabuf, ::testing::Values(8, 12),
                         [](const auto& info) { return "v" + std::to_string(info.param); });

// Loom's socket provider as a v12 plugin, driven through its table as NCCL would: regMrDmaBuf is set
// and reaches the provider's registerDmabuf, whose refusal (host memory only) comes back as an error
// carrying the provider's reason through the plugin's logger.
TEST(ExportedPluginDmabuf, RegMrDmaBufReachesTheProvider) {
  plugin::LoadedPlugin* p = nullptr;
  Status st = plugin::openPlugin(pluginFile(12), &p);
  ASSERT_TRUE(st.ok()) << st.message();
  plugin::PluginCalls& calls = *p->calls;
  ASSERT_TRUE(calls.hasRegMrDmaBuf());
  void* ctx = nullptr;
  ASSERT_EQ(calls.init(&ctx, 0x5eed), abi::kSuccess);
  int ndev = 0, device = -1;
  ASSERT_EQ(calls.devices(&ndev), abi::kSuccess);
  for (int d = 0; d < ndev && device < 0; ++d) {
    DeviceProperties props;
    if (calls.properties(d, &props) == abi::kSuccess && props.name == "lo") device = d;
  }
  ASSERT_GE(device, 0) << "no loopback device";
  Handle handle;
  void *listenComm = nullptr, *sendComm = nullptr, *recvComm = nullptr;
  ASSERT_EQ(calls.listen(ctx, device, handle.bytes.data(), &listenComm), abi::kSuccess);
  const Deadline deadline = Deadline::afterMs(10000);
  while ((!sendComm || !recvComm) && !deadline.expired()) {
    if (!sendComm) {
      ASSERT_EQ(calls.connect(ctx, device, handle.bytes.data(), &sendComm), abi::kSuccess);
    }
    if (!recvComm) {
      ASSERT_EQ(calls.accept(listenComm, &recvComm), abi::kSuccess);
    }
  }
  ASSERT_TRUE(sendComm && recvComm);
  const int fd = memfd_create("loom-fake-dmabuf", MFD_CLOEXEC);  // stands for a GPU's dmabuf
  ASSERT_GE(fd, 0);
  char buffer[64];
  void* mhandle = nullptr;
  const abi::Result r = calls.regMrDmaBuf(sendComm, buffer, sizeof buffer, abi::kPtrCuda, 0, fd, &mhandle);
  EXPECT_EQ(r, abi::kInvalidArgument);
  expectWords(plugin::pluginError(calls.name(), "regMrDmaBuf", r).message(),
              {"'loomsock'", "regMrDmaBuf", "does not register dmabuf memory"});
  ::close(fd);
  EXPECT_EQ(calls.closeSend(sendComm), abi::kSuccess);
  EXPECT_EQ(calls.closeRecv(recvComm), abi::kSuccess);
  EXPECT_EQ(calls.closeListen(listenComm), abi::kSuccess);
  EXPECT_EQ(calls.finalize(ctx), abi::kSuccess);
}

}  // namespace
}  // namespace loom::net
