// Loom's socket provider as an external NCCL net plugin: a shared object exporting
// ncclNetPlugin_v<LOOM_PLUGIN_VERSION> (8..12), which NCCL, or Loom's own plugin loader, can load.
// The tests build it for several versions and load it back, so that the loader and the version
// adapters are checked against a plugin that really moves data.
//
// Plugins before v11 have one process-wide state (their init is global, as in NCCL); v11+ get a
// provider per init context.
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/net/plugin/plugin_abi.h"
#include "transport/net/socket/socket_provider.h"

#ifndef LOOM_PLUGIN_VERSION
#error "LOOM_PLUGIN_VERSION (8..12) must be defined"
#endif

// Each version's table takes a subset of the adapters below; the others are unused in that build.
#pragma GCC diagnostic ignored "-Wunused-function"

namespace {

using namespace loom;
using namespace loom::net;
namespace abi = loom::net::plugin::abi;
constexpr int kVersion = LOOM_PLUGIN_VERSION;

// Names and paths the property structs point to live as long as the plugin. NCCL calls listen and
// connect of one plugin from several threads at once (every communicator's proxy shares a v8..v10
// plugin's global state), while a Loom provider expects one caller at a time: those two calls take
// the context's lock. A comm's own calls need none: one thread drives a comm.
struct Context {
  std::unique_ptr<Provider> provider;
  std::vector<std::string> names, paths;
  std::mutex setupMutex;
};

std::atomic<abi::Logger> logger{nullptr};  // v11+ init sets it per context, maybe from two threads
std::mutex globalMutex;
std::unique_ptr<Context> global;  // v8..v10

// What a plugin comm handle points to: the comm and its requests. A request carries its comm (the
// ABI's test() gets the request alone); they live with the comm, so requests still outstanding when
// the comm closes go with it.
struct ExportedComm;
struct ExportedRequest {
  ExportedComm* owner = nullptr;
  Request* request = nullptr;  // null: free
};
struct ExportedComm {
  explicit ExportedComm(std::unique_ptr<Comm> c) : comm(std::move(c)) {
    for (ExportedRequest& r : requests) r.owner = this;
  }
  ExportedRequest* wrap(Request* request) {
    if (!request) return nullptr;
    for (ExportedRequest& r : requests)
      if (!r.request) {
        r.request = request;
        return &r;
      }
    return nullptr;  // unreachable: the comm refuses more requests than it has
  }
  std::unique_ptr<Comm> comm;
  std::array<ExportedRequest, kMaxRequestsPerComm> requests;
};

abi::Result fail(const Status& st) {
  if (abi::Logger log = logger.load()) log(abi::kLogWarn, ~0ul, __FILE__, __LINE__, "%s", st.message().c_str());
  switch (st.code()) {
    case loomRemoteError: return abi::kRemoteError;
    case loomInvalidArgument: return abi::kInvalidArgument;
    case loomInvalidUsage: return abi::kInvalidUsage;
    case loomInternalError: return abi::kInternalError;
    default: return abi::kSystemError;
  }
}

abi::Result makeContext(std::unique_ptr<Context>* out, bool withHelpers = true) {
  auto ctx = std::make_unique<Context>();
  socket::SocketConfig config;
  Status st = socket::readSocketConfig(&config);
  if (!withHelpers) config.nthreads = 0;
  if (st.ok()) st = socket::SocketProvider::create(config, &ctx->provider);
  if (!st.ok()) return fail(st);
  for (int d = 0; d < ctx->provider->deviceCount(); ++d) {
    DeviceProperties p;
    (void)ctx->provider->deviceProperties(d, &p);
    ctx->names.push_back(p.name);
    ctx->paths.push_back(p.pciPath);
  }
  *out = std::move(ctx);
  return abi::kSuccess;
}

Context* contextOf(void* ctx) {
  if constexpr (kVersion >= 11) return static_cast<Context*>(ctx);
  (void)ctx;
  return global.get();
}

abi::Result initGlobal(abi::Logger log) {
  std::lock_guard<std::mutex> lock(globalMutex);
  logger = log;
  return global ? abi::kSuccess : makeContext(&global);
}

abi::Result initContext(void** ctx, uint64_t commId, abi::CommConfig* config, abi::Logger log,
                        abi::ProfilerCallback profiler) {
  (void)commId, (void)config, (void)profiler;
  logger = log;
  std::unique_ptr<Context> c;
  const abi::Result r = makeContext(&c);
  *ctx = r == abi::kSuccess ? c.release() : nullptr;
  return r;
}

abi::Result finalize(void* ctx) {
  delete static_cast<Context*>(ctx);
  return abi::kSuccess;
}

// devices() and getProperties() take no context, even in v11+: they answer from the global context,
// or from a catalogue made once (without helper threads) for the device list and its strings.
Context* catalogue() {
  std::lock_guard<std::mutex> lock(globalMutex);
  static std::unique_ptr<Context> list;
  if (global) return global.get();
  if (!list && makeContext(&list, false) != abi::kSuccess) return nullptr;
  return list.get();
}

abi::Result devices(int* ndev) {
  Context* c = catalogue();
  if (!c) return abi::kSystemError;
  *ndev = c->provider->deviceCount();
  return abi::kSuccess;
}

template <typename Props>
abi::Result getProperties(int dev, Props* props) {
  Context* c = catalogue();
  if (!c) return abi::kSystemError;
  DeviceProperties p;
  if (Status st = c->provider->deviceProperties(dev, &p); !st.ok()) return fail(st);
  std::memset(props, 0, sizeof *props);
  props->name = c->names[dev].data();
  props->pciPath = c->paths[dev].empty() ? nullptr : c->paths[dev].data();
  props->guid = p.guid;
  props->ptrSupport = abi::kPtrHost;
  props->regIsGlobal = 1;  // registering costs nothing: NCCL, and Loom, may register per call
  props->speed = p.speedMbps;
  props->port = p.port;
  props->latency = p.latencyUs;
  props->maxComms = p.maxComms;
  props->maxRecvs = p.maxRecvs;
  props->netDeviceType = abi::kNetDeviceHost;
  if constexpr (requires { props->maxP2pBytes; }) {
    props->maxP2pBytes = props->maxCollBytes = size_t{1} << 40;
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
  }
  if constexpr (requires { props->maxMultiRequestSize; }) props->maxMultiRequestSize = 1;
  return abi::kSuccess;
}

abi::Result listen(void* ctx, int dev, void* handle, void** listenComm) {
  Handle h;
  std::unique_ptr<ListenComm> comm;
  Context* c = contextOf(ctx);
  std::unique_lock<std::mutex> lock(c->setupMutex);
  if (Status st = c->provider->listen(dev, &h, &comm); !st.ok()) return fail(st);
  std::memcpy(handle, h.bytes.data(), abi::kHandleBytes);
  *listenComm = comm.release();
  return abi::kSuccess;
}

abi::Result connect(void* ctx, int dev, void* handle, void** sendComm) {
  Handle h;
  std::memcpy(h.bytes.data(), handle, abi::kHandleBytes);
  std::unique_ptr<SendComm> comm;
  Context* c = contextOf(ctx);
  std::unique_lock<std::mutex> lock(c->setupMutex);
  Status st = c->provider->connect(dev, &h, &comm);
  lock.unlock();
  std::memcpy(handle, h.bytes.data(), abi::kHandleBytes);  // the connect's progress lives in the handle
  if (!st.ok()) return fail(st);
  *sendComm = comm ? new ExportedComm(std::move(comm)) : nullptr;
  return abi::kSuccess;
}

abi::Result accept(void* listenComm, void** recvComm, abi::DeviceHandle** deviceComm) {
  (void)deviceComm;
  std::unique_ptr<RecvComm> comm;
  if (Status st = static_cast<ListenComm*>(listenComm)->accept(&comm); !st.ok()) return fail(st);
  *recvComm = comm ? new ExportedComm(std::move(comm)) : nullptr;
  return abi::kSuccess;
}

abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  MemoryRegion* region = nullptr;
  if (Status st = static_cast<ExportedComm*>(comm)->comm->registerMemory(data, size, type, &region); !st.ok())
    return fail(st);
  *mhandle = region;
  return abi::kSuccess;
}

// `type` is NCCL_PTR_CUDA whenever NCCL calls it; the provider's registerDmabuf knows its memory is
// GPU memory already. The socket provider refuses (its devices report host pointers only, so NCCL
// never asks), and its reason reaches the caller through the logger.
abi::Result regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  (void)type;
  MemoryRegion* region = nullptr;
  if (Status st = static_cast<ExportedComm*>(comm)->comm->registerDmabuf(data, size, fd, offset, &region); !st.ok())
    return fail(st);
  *mhandle = region;
  return abi::kSuccess;
}

abi::Result deregMr(void* comm, void* mhandle) {
  Status st = static_cast<ExportedComm*>(comm)->comm->deregisterMemory(static_cast<MemoryRegion*>(mhandle));
  return st.ok() ? abi::kSuccess : fail(st);
}

abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  auto* comm = static_cast<ExportedComm*>(sendComm);
  Request* r = nullptr;
  Status st = static_cast<SendComm*>(comm->comm.get())->isend(data, size, tag, static_cast<MemoryRegion*>(mhandle), &r);
  if (!st.ok()) return fail(st);
  *request = comm->wrap(r);
  return abi::kSuccess;
}

abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, int* tags, void** mhandles, void** request) {
  auto* comm = static_cast<ExportedComm*>(recvComm);
  Request* r = nullptr;
  Status st = static_cast<RecvComm*>(comm->comm.get())->irecv(n, data, sizes, tags,
                                                              reinterpret_cast<MemoryRegion* const*>(mhandles), &r);
  if (!st.ok()) return fail(st);
  *request = comm->wrap(r);
  return abi::kSuccess;
}

abi::Result iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  (void)recvComm, (void)n, (void)data, (void)sizes, (void)mhandles;
  *request = nullptr;  // host memory only: nothing to flush
  return abi::kSuccess;
}

abi::Result test(void* request, int* done, int* sizes) {
  auto* r = static_cast<ExportedRequest*>(request);
  bool finished = false;
  size_t size = 0;
  Status st = r->owner->comm->test(r->request, &finished, &size);
  if (!st.ok()) return fail(st);
  *done = finished ? 1 : 0;
  if (finished) {
    if (sizes) *sizes = static_cast<int>(size);
    r->request = nullptr;
  }
  return abi::kSuccess;
}

abi::Result closeComm(void* comm) {
  delete static_cast<ExportedComm*>(comm);
  return abi::kSuccess;
}

abi::Result closeListen(void* listenComm) {
  delete static_cast<ListenComm*>(listenComm);
  return abi::kSuccess;
}

abi::Result setNetAttr(void* ctx, abi::NetAttr* attr) {
  (void)ctx, (void)attr;  // hints about the traffic to come; the socket provider has no use for them
  return abi::kSuccess;
}

// The shapes older tables want, over the calls above.
abi::Result listenNoContext(int dev, void* handle, void** listenComm) { return listen(nullptr, dev, handle, listenComm); }
abi::Result connectV8(int dev, void* handle, void** sendComm, abi::DeviceHandle**) {
  return connect(nullptr, dev, handle, sendComm);
}
abi::Result connectV10(int dev, abi::CommConfig*, void* handle, void** sendComm, abi::DeviceHandle**) {
  return connect(nullptr, dev, handle, sendComm);
}
abi::Result connectV11(void* ctx, int dev, void* handle, void** sendComm, abi::DeviceHandle**) {
  return connect(ctx, dev, handle, sendComm);
}
abi::Result initV10(abi::Logger log, abi::ProfilerCallback) { return initGlobal(log); }
abi::Result isendV8(void* s, void* data, int size, int tag, void* mhandle, void** request) {
  return isend(s, data, static_cast<size_t>(size), tag, mhandle, request);
}
abi::Result isendV10(void* s, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
  return isend(s, data, size, tag, mhandle, request);
}
abi::Result irecvV8(void* c, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  size_t wide[8];
  if (n < 1 || n > 8) return abi::kInvalidArgument;
  for (int i = 0; i < n; ++i) wide[i] = static_cast<size_t>(sizes[i]);
  return irecv(c, n, data, wide, tags, mhandles, request);
}
abi::Result irecvV9(void* c, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  return irecv(c, n, data, sizes, tags, mhandles, request);
}
abi::Result irecvV10(void* c, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**, void** request) {
  return irecv(c, n, data, sizes, tags, mhandles, request);
}

}  // namespace

#define LOOM_EXPORT extern "C" __attribute__((visibility("default")))

#if LOOM_PLUGIN_VERSION == 8
LOOM_EXPORT const abi::NetV8 ncclNetPlugin_v8 = {
    "loomsock", initGlobal, devices, getProperties<abi::PropertiesV8>, listenNoContext, connectV8, accept, regMr,
    regMrDmaBuf, deregMr, isendV8, irecvV8, iflush, test, closeComm, closeComm, closeListen, nullptr, nullptr};
#elif LOOM_PLUGIN_VERSION == 9
LOOM_EXPORT const abi::NetV9 ncclNetPlugin_v9 = {
    "loomsock", initGlobal, devices, getProperties<abi::PropertiesV9>, listenNoContext, connectV8, accept, regMr,
    regMrDmaBuf, deregMr, isend, irecvV9, iflush, test, closeComm, closeComm, closeListen, nullptr, nullptr, nullptr};
#elif LOOM_PLUGIN_VERSION == 10
LOOM_EXPORT const abi::NetV10 ncclNetPlugin_v10 = {
    "loomsock", initV10, devices, getProperties<abi::PropertiesV10>, listenNoContext, connectV10, accept, regMr,
    regMrDmaBuf, deregMr, isendV10, irecvV10, iflush, test, closeComm, closeComm, closeListen, nullptr, nullptr,
    nullptr};
#elif LOOM_PLUGIN_VERSION == 11
LOOM_EXPORT const abi::NetV11 ncclNetPlugin_v11 = {
    "loomsock", initContext, devices, getProperties<abi::PropertiesV11>, listen, connectV11, accept, regMr, regMrDmaBuf,
    deregMr, isendV10, irecvV10, iflush, test, closeComm, closeComm, closeListen, nullptr, nullptr, nullptr, finalize,
    setNetAttr};
#elif LOOM_PLUGIN_VERSION == 12
LOOM_EXPORT const abi::NetV12 ncclNetPlugin_v12 = {
    "loomsock", initContext, devices, getProperties<abi::PropertiesV12>, listen, connectV11, accept, regMr, regMrDmaBuf,
    deregMr, isendV10, irecvV10, iflush, test, closeComm, closeComm, closeListen, nullptr, nullptr, nullptr, finalize,
    setNetAttr};
#else
#error "LOOM_PLUGIN_VERSION must be 8..12"
#endif
