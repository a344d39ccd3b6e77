// FakeCuda: the CUDA runtime API functions that Loom and its GPU tests call, on host memory and the
// streams of fake_device.h. Declarations come from the real cuda_runtime_api.h, so every signature is
// the runtime's own. Stream capture and graphs are fake_graphs.cc's; CUDA IPC's shared memory is
// fake_ipc.cc's.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "fake_counters.h"
#include "fake_device.h"
#include "fake_ipc.h"

struct CUevent_st {
  fakecuda::DoneRef done;  // null until recorded
};
struct CUmemPoolHandle_st {
  int device = 0;
};

namespace fakecuda {
namespace {

// Every allocation the fake made, so that cudaPointerGetAttributes can answer for interior pointers.
struct Allocation {
  size_t bytes = 0;
  cudaMemoryType type = cudaMemoryTypeDevice;
  int device = 0;
  bool legacyIpc = false;  // cudaMalloc's: what CUDA IPC and peer access cover (not pools' memory)
  int sharedFd = -1;       // cudaMalloc's memory is a memfd's (fake_ipc.h), exported by number
  uint64_t sharedId = 0;
  int ipcOpens = 0;        // > 0: another process's memory, mapped by cudaIpcOpenMemHandle this often
  std::pair<uint64_t, uint64_t> ipcKey;  // that memory's exporter and number
};

struct Memory {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> live;
  std::map<std::pair<uint64_t, uint64_t>, uintptr_t> opened;  // another process's allocations mapped here
  std::set<std::pair<int, int>> peerAccess;
};

Memory& memory() {
  static Memory* m = new Memory;
  return *m;
}

// A device's primary context is active once the process allocated on it or made a stream there.
std::atomic<bool> touched[16];
void touch() { touched[currentDevice()] = true; }

void* allocate(size_t bytes, cudaMemoryType type, bool legacyIpc) {
  touch();
  countAllocation();
  if (legacyIpc) {  // whole pages of shared memory, which another process can map
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t rounded = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
    Allocation a{rounded, type, currentDevice(), true};
    void* p = mapSharedBlock(rounded, &a.sharedFd, &a.sharedId);
    if (!p) return nullptr;
    std::lock_guard<std::mutex> lock(memory().mutex);
    memory().live[reinterpret_cast<uintptr_t>(p)] = a;
    return p;
  }
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded);
  if (!p) return nullptr;
  std::lock_guard<std::mutex> lock(memory().mutex);
  memory().live[reinterpret_cast<uintptr_t>(p)] = Allocation{rounded, type, currentDevice(), legacyIpc};
  return p;
}

bool find(const void* p, uintptr_t* base, Allocation* out) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = memory().live.upper_bound(at);
  if (it == memory().live.begin()) return false;
  --it;
  if (at >= it->first + it->second.bytes) return false;
  *base = it->first;
  *out = it->second;
  return true;
}

cudaError_t release(void* p, cudaMemoryType type) {
  if (!p) return cudaSuccess;
  countFree();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(memory().mutex);
    auto it = memory().live.find(reinterpret_cast<uintptr_t>(p));
    // Another process's memory goes with cudaIpcCloseMemHandle, not a free.
    if (it == memory().live.end() || it->second.type != type || it->second.ipcOpens > 0) return fail(cudaErrorInvalidValue);
    a = it->second;
    memory().live.erase(it);
  }
  if (a.sharedFd >= 0)
    unmapSharedBlock(p, a.bytes, a.sharedFd);
  else
    std::free(p);
  return cudaSuccess;
}

// What the runtime would wait for around an allocation or a free: every stream of the device.
void implicitSynchronization() { synchronizeDevice(currentDevice()); }

cudaError_t enqueueOrFail(cudaStream_t stream, std::function<void()> work, NodeKind kind = NodeKind::Kernel) {
  return enqueue(stream, std::move(work), {}, kind) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

// A copy from host memory (pinned, or not known to the fake: pageable) into device memory.
void countIfHostToDevice(void* dst, const void* src) {
  uintptr_t base = 0;
  Allocation to, from;
  const bool toDevice = find(dst, &base, &to) && to.type == cudaMemoryTypeDevice;
  const bool fromHost = !find(src, &base, &from) || from.type == cudaMemoryTypeHost;
  if (toDevice && fromHost) countHostToDeviceCopy();
}

// The legacy stream's copy, waited for: the synchronous API's behaviour.
cudaError_t onLegacyAndWait(std::function<void()> work, NodeKind kind) {
  countDeviceSynchronization();
  DoneRef done = enqueue(nullptr, std::move(work), {}, kind);
  done->wait();
  return cudaSuccess;
}

CUresult fakePointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  FAKECUDA_ENTRY_NAMED("cuPointerGetAttribute");
  if (attribute != CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE) return CUDA_ERROR_NOT_SUPPORTED;
  uintptr_t base = 0;
  Allocation a;
  const bool known = find(reinterpret_cast<const void*>(ptr), &base, &a);
  *static_cast<int*>(data) = known && a.legacyIpc ? 1 : 0;
  return known ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// The allocation holding ptr, as the driver reports it (its size rounded as allocate() rounded it).
CUresult fakeMemGetAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  FAKECUDA_ENTRY_NAMED("cuMemGetAddressRange");
  uintptr_t start = 0;
  Allocation a;
  if (!find(reinterpret_cast<const void*>(ptr), &start, &a)) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = static_cast<CUdeviceptr>(start);
  if (size) *size = a.bytes;
  return CUDA_SUCCESS;
}

bool validDevice(int device) { return device >= 0 && device < deviceCount(); }

CUresult fakeDeviceGet(CUdevice* device, int ordinal) {
  FAKECUDA_ENTRY_NAMED("cuDeviceGet");
  if (!validDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}


CUresult fakePrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  FAKECUDA_ENTRY_NAMED("cuDevicePrimaryCtxGetState");
  if (!validDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = touched[device] ? 1 : 0;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

namespace fakecuda {
void releaseGraphMemory(void* p) { release(p, cudaMemoryTypeDevice); }
}  // namespace fakecuda

using namespace fakecuda;

// ---- Errors and devices

cudaError_t cudaGetLastError() {
  FAKECUDA_ENTRY();
  return takeLastError();
}
cudaError_t cudaPeekAtLastError() {
  FAKECUDA_ENTRY();
  return cudaSuccess;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorPeerAccessAlreadyEnabled: return "cudaErrorPeerAccessAlreadyEnabled";
    case cudaErrorCooperativeLaunchTooLarge: return "cudaErrorCooperativeLaunchTooLarge";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "an error of the CUDA test double (FakeCuda)";
}

cudaError_t cudaGetDeviceCount(int* count) {
  FAKECUDA_ENTRY();
  *count = deviceCount();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  FAKECUDA_ENTRY();
  if (!validDevice(device)) return fail(cudaErrorInvalidDevice);
  setCurrentDevice(device);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  FAKECUDA_ENTRY();
  *device = currentDevice();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  FAKECUDA_ENTRY();
  implicitSynchronization();
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  FAKECUDA_ENTRY();
  if (!validDevice(device)) return fail(cudaErrorInvalidDevice);
  if (attribute != cudaDevAttrMultiProcessorCount) return fail(cudaErrorNotSupported);
  *value = static_cast<int>(residentBlocks());
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  FAKECUDA_ENTRY();
  if (!validDevice(device)) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "FakeCuda device %d (the CUDA test double)", device);
  prop->multiProcessorCount = static_cast<int>(residentBlocks());
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  FAKECUDA_ENTRY();
  if (!validDevice(device)) return fail(cudaErrorInvalidDevice);
  std::snprintf(pciBusId, static_cast<size_t>(len), "0000:%02x:00.0", 0x10 + device);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* pciBusId) {
  FAKECUDA_ENTRY();
  unsigned domain = 0, bus = 0;
  if (std::sscanf(pciBusId, "%x:%x", &domain, &bus) != 2 || !validDevice(static_cast<int>(bus) - 0x10))
    return fail(cudaErrorInvalidDevice);
  *device = static_cast<int>(bus) - 0x10;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* canAccess, int device, int peerDevice) {
  FAKECUDA_ENTRY();
  if (!validDevice(device) || !validDevice(peerDevice)) return fail(cudaErrorInvalidDevice);
  *canAccess = device != peerDevice;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int) {
  FAKECUDA_ENTRY();
  if (!validDevice(peerDevice) || peerDevice == currentDevice()) return fail(cudaErrorInvalidDevice);
  std::lock_guard<std::mutex> lock(memory().mutex);
  if (!memory().peerAccess.emplace(currentDevice(), peerDevice).second) return fail(cudaErrorPeerAccessAlreadyEnabled);
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* driverStatus) {
  FAKECUDA_ENTRY();
  *funcPtr = std::strcmp(symbol, "cuPointerGetAttribute") == 0        ? reinterpret_cast<void*>(&fakePointerGetAttribute)
             : std::strcmp(symbol, "cuMemGetAddressRange") == 0       ? reinterpret_cast<void*>(&fakeMemGetAddressRange)
             : std::strcmp(symbol, "cuDeviceGet") == 0                ? reinterpret_cast<void*>(&fakeDeviceGet)
             : std::strcmp(symbol, "cuDevicePrimaryCtxGetState") == 0 ? reinterpret_cast<void*>(&fakePrimaryCtxGetState)
                                                                      : nullptr;
  const bool known = *funcPtr != nullptr;
  if (driverStatus) *driverStatus = known ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

// ---- Memory

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  FAKECUDA_ENTRY();
  implicitSynchronization();
  *devPtr = allocate(size, cudaMemoryTypeDevice, true);
  return *devPtr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* devPtr) {
  FAKECUDA_ENTRY();
  implicitSynchronization();
  return release(devPtr, cudaMemoryTypeDevice);
}

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int) {
  FAKECUDA_ENTRY();
  implicitSynchronization();
  *devPtr = allocate(size, cudaMemoryTypeManaged, false);
  return *devPtr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int) {
  FAKECUDA_ENTRY();
  implicitSynchronization();
  *pHost = allocate(size, cudaMemoryTypeHost, false);
  return *pHost ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  FAKECUDA_ENTRY();
  return cudaHostAlloc(ptr, size, 0);
}

cudaError_t cudaFreeHost(void* ptr) {
  FAKECUDA_ENTRY();
  implicitSynchronization();
  return release(ptr, cudaMemoryTypeHost);
}

cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int) {
  FAKECUDA_ENTRY();
  *pDevice = pHost;  // one address space
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  FAKECUDA_ENTRY();
  *attributes = cudaPointerAttributes{};
  attributes->type = cudaMemoryTypeUnregistered;
  uintptr_t base = 0;
  Allocation a;
  if (find(ptr, &base, &a)) {
    attributes->type = a.type;
    attributes->device = a.device;
    attributes->devicePointer = const_cast<void*>(ptr);
    attributes->hostPointer = a.type == cudaMemoryTypeDevice ? nullptr : const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind) {
  FAKECUDA_ENTRY();
  countIfHostToDevice(dst, src);
  return onLegacyAndWait([=] { std::memmove(dst, src, count); }, NodeKind::Memcpy);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind, cudaStream_t stream) {
  FAKECUDA_ENTRY();
  countIfHostToDevice(dst, src);
  return enqueueOrFail(stream, [=] { std::memmove(dst, src, count); }, NodeKind::Memcpy);
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  FAKECUDA_ENTRY();
  return onLegacyAndWait([=] { std::memset(devPtr, value, count); }, NodeKind::Memset);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  FAKECUDA_ENTRY();
  return enqueueOrFail(stream, [=] { std::memset(devPtr, value, count); }, NodeKind::Memset);
}

// Stream-ordered memory: the allocation exists at once (the stream's order is what makes it safe to
// use); the free waits its turn on the stream. No implicit synchronization, as on a GPU.
cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool, const cudaMemPoolProps* props) {
  FAKECUDA_ENTRY();
  *memPool = new CUmemPoolHandle_st{props->location.id};
  return cudaSuccess;
}
cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
  FAKECUDA_ENTRY();
  delete memPool;
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) {
  FAKECUDA_ENTRY();
  return cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t, cudaStream_t stream) {
  FAKECUDA_ENTRY();
  std::shared_ptr<Stream> s = streamOf(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  *ptr = allocate(size, cudaMemoryTypeDevice, false);
  if (!*ptr) return fail(cudaErrorMemoryAllocation);
  if (GraphRef graph = s->capture()) {  // a graph memory node: the graph owns the memory
    enqueue(stream, [] {}, {}, NodeKind::MemAlloc);
    std::lock_guard<std::mutex> lock(graph->mutex);
    graph->owned.push_back(*ptr);
  }
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t stream) {
  FAKECUDA_ENTRY();
  return cudaMallocFromPoolAsync(devPtr, size, nullptr, stream);
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t stream) {
  FAKECUDA_ENTRY();
  std::shared_ptr<Stream> s = streamOf(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  if (s->capture()) return enqueueOrFail(stream, [] {}, NodeKind::MemFree);  // the graph's memory goes with it
  return enqueueOrFail(stream, [devPtr] { release(devPtr, cudaMemoryTypeDevice); });
}

// CUDA IPC (fake_ipc.h): a handle names a cudaMalloc's base; another process maps it, once however often
// it opens it, and unmaps it at the last close.
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  FAKECUDA_ENTRY();
  uintptr_t base = 0;
  Allocation a;
  if (!find(devPtr, &base, &a) || !a.legacyIpc || a.sharedFd < 0 || base != reinterpret_cast<uintptr_t>(devPtr))
    return fail(cudaErrorInvalidValue);
  *handle = handleOf(a.sharedFd, a.sharedId, a.bytes);
  return cudaSuccess;
}
cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int) {
  FAKECUDA_ENTRY();
  uint64_t key[2];
  if (const cudaError_t err = handleKey(handle, key); err != cudaSuccess) return fail(err);
  std::lock_guard<std::mutex> lock(memory().mutex);
  Memory& m = memory();
  if (auto it = m.opened.find({key[0], key[1]}); it != m.opened.end()) {
    ++m.live[it->second].ipcOpens;
    *devPtr = reinterpret_cast<void*>(it->second);
    return cudaSuccess;
  }
  void* base = nullptr;
  size_t bytes = 0;
  if (const cudaError_t err = mapHandle(handle, &base, &bytes); err != cudaSuccess) return fail(err);
  Allocation a{bytes, cudaMemoryTypeDevice, currentDevice(), false};
  a.ipcOpens = 1;
  a.ipcKey = {key[0], key[1]};
  m.live[reinterpret_cast<uintptr_t>(base)] = a;
  m.opened[a.ipcKey] = reinterpret_cast<uintptr_t>(base);
  *devPtr = base;
  return cudaSuccess;
}
cudaError_t cudaIpcCloseMemHandle(void* devPtr) {
  FAKECUDA_ENTRY();
  std::lock_guard<std::mutex> lock(memory().mutex);
  Memory& m = memory();
  auto it = m.live.find(reinterpret_cast<uintptr_t>(devPtr));
  if (it == m.live.end() || it->second.ipcOpens == 0) return fail(cudaErrorInvalidValue);
  if (--it->second.ipcOpens == 0) {
    unmapSharedBlock(devPtr, it->second.bytes, -1);
    m.opened.erase(it->second.ipcKey);
    m.live.erase(it);
  }
  return cudaSuccess;
}

// ---- Streams and events

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  FAKECUDA_ENTRY();
  touch();
  *stream = createStream(true);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  FAKECUDA_ENTRY();
  touch();
  *stream = createStream((flags & cudaStreamNonBlocking) == 0);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  FAKECUDA_ENTRY();
  if (!stream || stream == cudaStreamLegacy) return fail(cudaErrorInvalidResourceHandle);
  destroyStream(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  FAKECUDA_ENTRY();
  countHostWait();
  DoneRef done = enqueue(stream, nullptr);  // on the legacy stream this also waits for the blocking ones
  if (!done) return fail(cudaErrorInvalidResourceHandle);
  done->wait();
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  FAKECUDA_ENTRY();
  DoneRef done = enqueue(stream, nullptr);  // a marker behind the work enqueued so far: done once that is
  if (!done) return fail(cudaErrorInvalidResourceHandle);
  return done->isSet() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  FAKECUDA_ENTRY();
  // An event recorded in a capture: the stream joins that capture (its later work becomes the graph's).
  if (GraphRef graph = event->done ? event->done->capture() : nullptr) {
    std::shared_ptr<Stream> s = streamOf(stream);
    if (!s) return fail(cudaErrorInvalidResourceHandle);
    if (!s->capture()) s->setCapture(graph);
    return s->capture() == graph ? cudaSuccess : fail(cudaErrorStreamCaptureIsolation);
  }
  std::vector<DoneRef> after;
  if (event->done) after.push_back(event->done);
  return enqueue(stream, nullptr, std::move(after)) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  FAKECUDA_ENTRY();
  return enqueueOrFail(stream, [fn, userData] { fn(userData); }, NodeKind::Host);
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  FAKECUDA_ENTRY();
  *event = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  FAKECUDA_ENTRY();
  return cudaEventCreate(event);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  FAKECUDA_ENTRY();
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  FAKECUDA_ENTRY();
  DoneRef done = enqueue(stream, nullptr);
  if (!done) return fail(cudaErrorInvalidResourceHandle);
  event->done = std::move(done);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  FAKECUDA_ENTRY();
  return !event->done || event->done->isSet() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  FAKECUDA_ENTRY();
  countHostWait();
  if (event->done) event->done->wait();
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  FAKECUDA_ENTRY();
  if (!start->done || !end->done || !start->done->isSet() || !end->done->isSet()) return fail(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(end->done->when() - start->done->when()).count();
  return cudaSuccess;
}
