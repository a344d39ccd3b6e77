#include "transport/net/plugin/plugin_calls.h"

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "base/log.h"

namespace loom::net::plugin {

namespace {

// The plugin's logger has no context argument: the last warning a thread saw explains the failure of
// the call that thread is making.
thread_local std::string lastWarning;

void pluginLogger(int level, unsigned long flags, const char* file, int line, const char* format, ...) {
  (void)flags;
  char text[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format ? format : "", args);
  va_end(args);
  switch (level) {
    case abi::kLogWarn:
    case abi::kLogAbort:
      lastWarning = text;
      LOOM_WARN(Net, "net plugin: {} ({}:{})", text, file ? file : "?", line);
      break;
    case abi::kLogTrace:
      LOOM_TRACE(Net, "net plugin: {}", text);
      break;
    default:
      LOOM_INFO(Net, "net plugin: {}", text);
  }
}

// Loom has no profiler for plugins to report to: every event is accepted and dropped.
abi::Result noProfiler(void** eventHandle, int type, void* pHandle, int64_t pluginId, void* extData) {
  (void)type, (void)pHandle, (void)pluginId, (void)extData;
  if (eventHandle) *eventHandle = nullptr;
  return abi::kSuccess;
}

template <typename Props>
void readProperties(const Props& p, int version, DeviceProperties* out) {
  DeviceProperties d;
  d.name = p.name ? p.name : "";
  d.pciPath = p.pciPath ? p.pciPath : "";
  d.guid = p.guid;
  d.ptrSupport = p.ptrSupport;
  d.regIsGlobal = p.regIsGlobal != 0;
  d.speedMbps = p.speed;
  d.port = p.port;
  d.latencyUs = p.latency;
  d.maxComms = p.maxComms;
  d.maxRecvs = p.maxRecvs;
  d.hostNeedsRegistration = true;  // NCCL's contract: every buffer is registered before it is used
  d.maxMessageBytes = size_t{1} << 30;  // NCCL's MAX_NET_SIZE for plugins with int sizes
  if constexpr (requires { p.maxP2pBytes; }) {
    d.forceFlush = p.forceFlush != 0;
    if (p.maxP2pBytes > 0) d.maxMessageBytes = p.maxP2pBytes;
  }
  (void)version;
  *out = d;
}

template <int V, typename Net, typename Props>
class Adapter final : public PluginCalls {
 public:
  explicit Adapter(const Net* net) : net_(net) {}
  int version() const override { return V; }
  const char* name() const override { return net_->name ? net_->name : "(unnamed)"; }

  abi::Result init(void** ctx, uint64_t commId) override {
    *ctx = nullptr;
    if constexpr (V >= 11) {
      abi::CommConfig config{abi::kTrafficClassUndefined};
      return net_->init(ctx, commId, &config, &pluginLogger, &noProfiler);
    } else {
      (void)commId;
      std::call_once(initOnce_, [&] {
        if constexpr (V >= 10)
          initResult_ = net_->init(&pluginLogger, &noProfiler);
        else
          initResult_ = net_->init(&pluginLogger);
      });
      return initResult_;
    }
  }
  abi::Result finalize(void* ctx) override {
    if constexpr (V >= 11) {
      if (net_->finalize) return net_->finalize(ctx);
    }
    (void)ctx;
    return abi::kSuccess;
  }
  abi::Result devices(int* ndev) override { return net_->devices(ndev); }
  abi::Result properties(int dev, DeviceProperties* out) override {
    Props p{};
    const abi::Result r = net_->getProperties(dev, &p);
    if (r == abi::kSuccess) readProperties(p, V, out);
    return r;
  }
  abi::Result listen(void* ctx, int dev, void* handle, void** listenComm) override {
    if constexpr (V >= 11)
      return net_->listen(ctx, dev, handle, listenComm);
    else
      return (void)ctx, net_->listen(dev, handle, listenComm);
  }
  abi::Result connect(void* ctx, int dev, void* handle, void** sendComm) override {
    abi::DeviceHandle* deviceComm = nullptr;  // no device offload asked for
    if constexpr (V >= 11) {
      return net_->connect(ctx, dev, handle, sendComm, &deviceComm);
    } else if constexpr (V == 10) {
      abi::CommConfig config{abi::kTrafficClassUndefined};
      return (void)ctx, net_->connect(dev, &config, handle, sendComm, &deviceComm);
    } else {
      return (void)ctx, net_->connect(dev, handle, sendComm, &deviceComm);
    }
  }
  abi::Result accept(void* listenComm, void** recvComm) override {
    abi::DeviceHandle* deviceComm = nullptr;
    return net_->accept(listenComm, recvComm, &deviceComm);
  }
  abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    return net_->regMr(comm, data, size, type, mhandle);
  }
  bool hasRegMrDmaBuf() const override { return net_->regMrDmaBuf != nullptr; }
  abi::Result regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                          void** mhandle) override {
    if (!net_->regMrDmaBuf) return abi::kInvalidUsage;
    return net_->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
  }
  abi::Result deregMr(void* comm, void* mhandle) override { return net_->deregMr(comm, mhandle); }
  abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    if constexpr (V == 8) {
      if (size > INT_MAX) return abi::kInvalidArgument;
      return net_->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request);
    } else if constexpr (V == 9) {
      return net_->isend(sendComm, data, size, tag, mhandle, request);
    } else {
      return net_->isend(sendComm, data, size, tag, mhandle, nullptr, request);
    }
  }
  abi::Result irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                    void** request) override {
    if (n < 1 || n > kMaxMultiRecv) return abi::kInvalidArgument;
    if constexpr (V == 8) {
      int narrow[kMaxMultiRecv];
      for (int i = 0; i < n; ++i) {
        if (sizes[i] > INT_MAX) return abi::kInvalidArgument;
        narrow[i] = static_cast<int>(sizes[i]);
      }
      return net_->irecv(recvComm, n, data, narrow, tags, mhandles, request);
    } else if constexpr (V == 9) {
      return net_->irecv(recvComm, n, data, sizes, tags, mhandles, request);
    } else {
      void* profilerHandles[kMaxMultiRecv] = {};
      return net_->irecv(recvComm, n, data, sizes, tags, mhandles, profilerHandles, request);
    }
  }
  abi::Result iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) override {
    return net_->iflush(recvComm, n, data, sizes, mhandles, request);
  }
  abi::Result test(void* request, int* done, int* sizes) override { return net_->test(request, done, sizes); }
  abi::Result closeSend(void* comm) override { return net_->closeSend(comm); }
  abi::Result closeRecv(void* comm) override { return net_->closeRecv(comm); }
  abi::Result closeListen(void* comm) override { return net_->closeListen(comm); }

 private:
  static constexpr int kMaxMultiRecv = 8;  // NCCL_NET_IB_MAX_RECVS: the most buffers NCCL posts at once
  const Net* net_;
  std::once_flag initOnce_;
  abi::Result initResult_ = abi::kSuccess;
};

const char* resultName(abi::Result r) {
  switch (r) {
    case abi::kSuccess: return "ncclSuccess";
    case abi::kUnhandledCudaError: return "ncclUnhandledCudaError";
    case abi::kSystemError: return "ncclSystemError";
    case abi::kInternalError: return "ncclInternalError";
    case abi::kInvalidArgument: return "ncclInvalidArgument";
    case abi::kInvalidUsage: return "ncclInvalidUsage";
    case abi::kRemoteError: return "ncclRemoteError";
    case abi::kInProgress: return "ncclInProgress";
  }
  return "an unknown ncclResult_t";
}

}  // namespace

std::unique_ptr<PluginCalls> adaptPlugin(int version, const void* table) {
  switch (version) {
    case 8: return std::make_unique<Adapter<8, abi::NetV8, abi::PropertiesV8>>(static_cast<const abi::NetV8*>(table));
    case 9: return std::make_unique<Adapter<9, abi::NetV9, abi::PropertiesV9>>(static_cast<const abi::NetV9*>(table));
    case 10: return std::make_unique<Adapter<10, abi::NetV10, abi::PropertiesV10>>(static_cast<const abi::NetV10*>(table));
    case 11: return std::make_unique<Adapter<11, abi::NetV11, abi::PropertiesV11>>(static_cast<const abi::NetV11*>(table));
    case 12: return std::make_unique<Adapter<12, abi::NetV12, abi::PropertiesV12>>(static_cast<const abi::NetV12*>(table));
  }
  return nullptr;
}

Status pluginError(const char* plugin, const char* call, abi::Result result) {
  const loomResult_t code = result == abi::kRemoteError    ? loomRemoteError
                            : result == abi::kInvalidArgument ? loomInvalidArgument
                            : result == abi::kInvalidUsage    ? loomInvalidUsage
                            : result == abi::kInternalError   ? loomInternalError
                                                              : loomSystemError;
  std::string text = fmt::format("net plugin '{}': {} returned {} ({})", plugin, call, resultName(result), result);
  if (!lastWarning.empty()) text += ": " + lastWarning;
  lastWarning.clear();
  return Status(code, text);
}

}  // namespace loom::net::plugin
