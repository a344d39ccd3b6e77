// The C ABI of NCCL's external net plugins, versions 8 to 12: the ncclNet_vN_t tables that a plugin
// exports as the symbol `ncclNetPlugin_vN`, and the property structs they fill. Declared here under
// Loom's names with the same layout as NCCL's published plugin headers (net_v8.h .. net_v12.h), so
// that Loom loads plugins (plugin_provider.cc) and exports its own socket provider as one
// (tests/net/plugin_export.cc) without NCCL's headers. Only what a host needs is spelled out: device offload
// handles, net attributes and the collective-network tables stay opaque.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::net::plugin::abi {

using Result = int;  // ncclResult_t
enum : Result {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5 };
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* format, ...);
using ProfilerCallback = Result (*)(void** eventHandle, int type, void* pHandle, int64_t pluginId, void* extData);

inline constexpr size_t kHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE
inline constexpr int kPtrHost = 1, kPtrCuda = 2, kPtrDmabuf = 4;
inline constexpr int kNetDeviceHost = 0;  // ncclNetDeviceType: no device offload
inline constexpr int kTrafficClassUndefined = -1;

struct DeviceHandle;  // ncclNetDeviceHandle_vN_t: Loom never asks for device offload
struct NetAttr;       // ncclNetAttr_vN_t (v11+ setNetAttr)

struct CommConfig {  // ncclNetCommConfig_v10_t .. v12
  int trafficClass;
};

struct PropertiesV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbps
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
};

template <int MaxDevsPerNic>
struct VDeviceProps {
  int ndevs;
  int devs[MaxDevsPerNic];
};

// v9 and v10 (NCCL_NET_MAX_DEVS_PER_NIC 4).
struct PropertiesV9 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDeviceProps<4> vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
};
using PropertiesV10 = PropertiesV9;

struct PropertiesV11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDeviceProps<4> vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};

struct PropertiesV12 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDeviceProps<8> vProps;  // NCCL_NET_MAX_DEVS_PER_NIC became 8
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
};

// The layouts NCCL's headers give on LP64 (a field out of place would corrupt every plugin call).
static_assert(sizeof(PropertiesV8) == 64 && offsetof(PropertiesV8, latency) == 40);
static_assert(sizeof(PropertiesV9) == 104 && offsetof(PropertiesV9, maxP2pBytes) == 88);
static_assert(sizeof(PropertiesV11) == 112 && offsetof(PropertiesV11, maxMultiRequestSize) == 104);
static_assert(sizeof(PropertiesV12) == 128 && offsetof(PropertiesV12, maxP2pBytes) == 104 &&
              offsetof(PropertiesV12, planeId) == 126);

struct NetV8 {
  const char* name;
  Result (*init)(Logger logger);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV8* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
};

struct NetV9 {
  const char* name;
  Result (*init)(Logger logger);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, VDeviceProps<4>* props);
};

struct NetV10 {
  const char* name;
  Result (*init)(Logger logger, ProfilerCallback profiler);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV10* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, CommConfig* config, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                  void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, VDeviceProps<4>* props);
};

// v11 and v12: init per communicator (a context), listen and connect take it; v12 changes only the
// property struct.
template <typename Props, int MaxDevsPerNic>
struct NetV11To12 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, CommConfig* config, Logger logger, ProfilerCallback profiler);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, Props* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  Result (*connect)(void* ctx, int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                  void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, VDeviceProps<MaxDevsPerNic>* props);
  Result (*finalize)(void* ctx);
  Result (*setNetAttr)(void* ctx, NetAttr* attr);
};
using NetV11 = NetV11To12<PropertiesV11, 4>;
using NetV12 = NetV11To12<PropertiesV12, 8>;

}  // namespace loom::net::plugin::abi
