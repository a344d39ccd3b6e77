// One loaded NCCL net plugin, whatever its version, behind the calls of the newest one (v12): older
// tables are adapted (sizes widened or narrowed, contexts and profiler handles dropped) the way NCCL
// adapts them. Plugins before v11 are initialised once per process (their init is global); v11 and
// later once per provider instance, with a context of their own.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "transport/net/plugin/plugin_abi.h"
#include "transport/net/provider.h"

namespace loom::net::plugin {

class PluginCalls {
 public:
  virtual ~PluginCalls() = default;
  virtual int version() const = 0;
  virtual const char* name() const = 0;
  // v11+: a context per caller; before: the process-wide init, once (later calls return its result).
  virtual abi::Result init(void** ctx, uint64_t commId) = 0;
  virtual abi::Result finalize(void* ctx) = 0;
  virtual abi::Result devices(int* ndev) = 0;
  virtual abi::Result properties(int dev, DeviceProperties* out) = 0;
  virtual abi::Result listen(void* ctx, int dev, void* handle, void** listenComm) = 0;
  virtual abi::Result connect(void* ctx, int dev, void* handle, void** sendComm) = 0;
  virtual abi::Result accept(void* listenComm, void** recvComm) = 0;
  virtual abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  // Every table Loom loads (v8..v12) has the regMrDmaBuf entry; a plugin that registers no dmabuf
  // leaves it NULL (NCCL's socket plugin does), and then regMrDmaBuf answers ncclInvalidUsage.
  virtual bool hasRegMrDmaBuf() const = 0;
  virtual abi::Result regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                  void** mhandle) = 0;
  virtual abi::Result deregMr(void* comm, void* mhandle) = 0;
  virtual abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  virtual abi::Result irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                            void** request) = 0;
  virtual abi::Result iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) = 0;
  virtual abi::Result test(void* request, int* done, int* sizes) = 0;
  virtual abi::Result closeSend(void* comm) = 0;
  virtual abi::Result closeRecv(void* comm) = 0;
  virtual abi::Result closeListen(void* comm) = 0;
};

// `table` is the plugin's ncclNetPlugin_v<version> symbol; null for a version Loom does not know.
std::unique_ptr<PluginCalls> adaptPlugin(int version, const void* table);

// The message of a plugin call that failed: the call, NCCL's name for the code, and the last warning
// the plugin logged (through the logger Loom gave it).
Status pluginError(const char* plugin, const char* call, abi::Result result);

}  // namespace loom::net::plugin
