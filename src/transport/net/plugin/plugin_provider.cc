#include "transport/net/plugin/plugin_provider.h"

#include <strings.h>

#include <atomic>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "transport/net/provider_table.h"

namespace loom::net::plugin {

namespace {

// Plugins see a distinct id per provider (v11+ init takes one as NCCL's communicator id).
std::atomic<uint64_t> nextCommId{1};

Status check(PluginCalls& calls, const char* call, abi::Result r) {
  return r == abi::kSuccess ? Status::Ok() : pluginError(calls.name(), call, r);
}

// The device a comm was made on, as far as its registrations need it.
struct PluginDevice {
  int index = 0;
  int ptrSupport = 0;
};

// What a plugin's send and receive comms share: the plugin's calls on one comm handle.
template <typename Base>
class PluginComm : public Base {
 public:
  PluginComm(PluginCalls* calls, void* comm, PluginDevice device) : calls_(calls), comm_(comm), device_(device) {}
  Status registerMemory(void* data, size_t bytes, int pointerKind, MemoryRegion** region) override {
    void* mh = nullptr;
    LOOM_TRY(check(*calls_, "regMr", calls_->regMr(comm_, data, bytes, pointerKind, &mh)));
    *region = reinterpret_cast<MemoryRegion*>(mh);
    return Status::Ok();
  }
  // As NCCL does: only a device that reports NCCL_PTR_DMABUF is given one, and the pointer kind passed
  // along is NCCL_PTR_CUDA (the dmabuf is GPU memory). The handle is a plain plugin mhandle, so
  // deregisterMemory (deregMr) releases it like any other.
  Status registerDmabuf(void* data, size_t bytes, int fd, uint64_t offset, MemoryRegion** region) override {
    if (!calls_->hasRegMrDmaBuf())
      return invalidArgument("net plugin '{}' registers no dmabuf memory: its ncclNetPlugin_v{} table leaves "
                             "regMrDmaBuf NULL",
                             calls_->name(), calls_->version());
    if ((device_.ptrSupport & abi::kPtrDmabuf) == 0)
      return invalidArgument("net plugin '{}': device {} does not take dmabuf memory (its ptrSupport {:#x} lacks "
                             "NCCL_PTR_DMABUF)",
                             calls_->name(), device_.index, device_.ptrSupport);
    void* mh = nullptr;
    LOOM_TRY(check(*calls_, "regMrDmaBuf", calls_->regMrDmaBuf(comm_, data, bytes, abi::kPtrCuda, offset, fd, &mh)));
    *region = reinterpret_cast<MemoryRegion*>(mh);
    return Status::Ok();
  }
  Status deregisterMemory(MemoryRegion* region) override {
    return check(*calls_, "deregMr", calls_->deregMr(comm_, region));
  }
  void addWaits(WaitList* waits) override { waits->capSleep(kPluginNapUs); }

 protected:
  PluginCalls* calls_;
  void* comm_;
  PluginDevice device_;
};

class PluginSendComm final : public PluginComm<SendComm> {
 public:
  using PluginComm::PluginComm;
  ~PluginSendComm() override { (void)calls_->closeSend(comm_); }
  Status test(Request* request, bool* done, size_t* sizes) override {
    int finished = 0, size = 0;
    LOOM_TRY(check(*calls_, "test", calls_->test(request, &finished, &size)));
    *done = finished != 0;
    if (*done && sizes) *sizes = static_cast<size_t>(size);
    return Status::Ok();
  }
  Status isend(const void* data, size_t bytes, int tag, MemoryRegion* region, Request** request) override {
    void* r = nullptr;
    LOOM_TRY(check(*calls_, "isend", calls_->isend(comm_, const_cast<void*>(data), bytes, tag, region, &r)));
    *request = static_cast<Request*>(r);
    return Status::Ok();
  }
};

class PluginRecvComm final : public PluginComm<RecvComm> {
 public:
  using PluginComm::PluginComm;
  ~PluginRecvComm() override { (void)calls_->closeRecv(comm_); }
  Status test(Request* request, bool* done, size_t* sizes) override {
    int finished = 0, size[kMaxBuffers] = {};
    LOOM_TRY(check(*calls_, "test", calls_->test(request, &finished, size)));
    *done = finished != 0;
    if (*done) {
      auto it = buffers_.find(request);
      const int n = it == buffers_.end() ? 1 : it->second;
      if (it != buffers_.end()) buffers_.erase(it);
      for (int i = 0; sizes && i < n; ++i) sizes[i] = static_cast<size_t>(size[i]);
    }
    return Status::Ok();
  }
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags, MemoryRegion* const* regions,
               Request** request) override {
    *request = nullptr;
    if (n < 1 || n > kMaxBuffers) return invalidArgument("a receive of {} buffers (at most {})", n, kMaxBuffers);
    void* d[kMaxBuffers];
    size_t s[kMaxBuffers];
    int t[kMaxBuffers];
    void* m[kMaxBuffers];
    for (int i = 0; i < n; ++i) d[i] = data[i], s[i] = sizes[i], t[i] = tags[i], m[i] = regions[i];
    void* r = nullptr;
    LOOM_TRY(check(*calls_, "irecv", calls_->irecv(comm_, n, d, s, t, m, &r)));
    *request = static_cast<Request*>(r);
    if (r && n > 1) buffers_[*request] = n;
    return Status::Ok();
  }
  Status iflush(int n, void* const* data, const size_t* sizes, MemoryRegion* const* regions,
                Request** request) override {
    *request = nullptr;
    if (n < 1 || n > kMaxBuffers) return invalidArgument("a flush of {} buffers (at most {})", n, kMaxBuffers);
    void* d[kMaxBuffers];
    int s[kMaxBuffers];
    void* m[kMaxBuffers];
    for (int i = 0; i < n; ++i) d[i] = data[i], s[i] = static_cast<int>(sizes[i]), m[i] = regions[i];
    void* r = nullptr;
    LOOM_TRY(check(*calls_, "iflush", calls_->iflush(comm_, n, d, s, m, &r)));
    *request = static_cast<Request*>(r);
    return Status::Ok();
  }

 private:
  static constexpr int kMaxBuffers = 8;
  std::unordered_map<Request*, int> buffers_;  // multi-buffer receives in flight
};

class PluginListenComm final : public ListenComm {
 public:
  PluginListenComm(PluginCalls* calls, void* comm, PluginDevice device) : calls_(calls), comm_(comm), device_(device) {}
  ~PluginListenComm() override { (void)calls_->closeListen(comm_); }
  Status accept(std::unique_ptr<RecvComm>* out) override {
    void* recvComm = nullptr;
    LOOM_TRY(check(*calls_, "accept", calls_->accept(comm_, &recvComm)));
    if (recvComm) *out = std::make_unique<PluginRecvComm>(calls_, recvComm, device_);
    return Status::Ok();
  }

 private:
  PluginCalls* calls_;
  void* comm_;
  PluginDevice device_;
};

class PluginProvider final : public Provider {
 public:
  PluginProvider(LoadedPlugin* plugin, void* ctx, std::vector<DeviceProperties> devices)
      : plugin_(plugin), ctx_(ctx), name_(plugin->calls->name()), devices_(std::move(devices)) {}
  ~PluginProvider() override { (void)plugin_->calls->finalize(ctx_); }
  const std::string& name() const override { return name_; }
  int deviceCount() const override { return static_cast<int>(devices_.size()); }
  Status deviceProperties(int device, DeviceProperties* out) const override {
    if (device < 0 || device >= deviceCount()) return invalidArgument("net plugin '{}': no device {}", name_, device);
    *out = devices_[device];
    return Status::Ok();
  }
  Status listen(int device, Handle* handle, std::unique_ptr<ListenComm>* out) override {
    void* comm = nullptr;
    LOOM_TRY(check(*plugin_->calls, "listen", plugin_->calls->listen(ctx_, device, handle->bytes.data(), &comm)));
    if (!comm) return pluginError(name_.c_str(), "listen (no listen comm)", abi::kInternalError);
    *out = std::make_unique<PluginListenComm>(plugin_->calls.get(), comm, deviceOf(device));
    return Status::Ok();
  }
  Status connect(int device, Handle* handle, std::unique_ptr<SendComm>* out) override {
    void* comm = nullptr;
    LOOM_TRY(check(*plugin_->calls, "connect", plugin_->calls->connect(ctx_, device, handle->bytes.data(), &comm)));
    if (comm) *out = std::make_unique<PluginSendComm>(plugin_->calls.get(), comm, deviceOf(device));
    return Status::Ok();
  }

 private:
  // The plugin checks the device index itself; one it accepted but did not list registers no dmabuf.
  PluginDevice deviceOf(int device) const {
    if (device < 0 || device >= deviceCount()) return PluginDevice{device, 0};
    return PluginDevice{device, devices_[device].ptrSupport};
  }

  LoadedPlugin* plugin_;
  void* ctx_;
  std::string name_;
  std::vector<DeviceProperties> devices_;
};

}  // namespace

Status makeProviderFrom(LoadedPlugin* plugin, std::unique_ptr<Provider>* out) {
  PluginCalls& calls = *plugin->calls;
  void* ctx = nullptr;
  LOOM_TRY(check(calls, "init", calls.init(&ctx, nextCommId.fetch_add(1))).withContext(plugin->file));
  int ndev = 0;
  Status st = check(calls, "devices", calls.devices(&ndev));
  std::vector<DeviceProperties> devices(st.ok() ? std::max(ndev, 0) : 0);
  for (int d = 0; st.ok() && d < ndev; ++d) st = check(calls, "getProperties", calls.properties(d, &devices[d]));
  if (!st.ok()) {
    (void)calls.finalize(ctx);
    return st.withContext(plugin->file);
  }
  *out = std::make_unique<PluginProvider>(plugin, ctx, std::move(devices));
  return Status::Ok();
}

Status makePluginProvider(const std::string& name, std::unique_ptr<Provider>* out) {
  std::string failures;
  const std::vector<LoadedPlugin*> plugins = configuredPlugins(&failures);
  if (name.empty()) {
    std::string notes = failures;
    for (LoadedPlugin* p : plugins) {
      Status st = makeProviderFrom(p, out);
      if (st.ok() && (*out)->deviceCount() > 0) return Status::Ok();
      notes += (notes.empty() ? "" : "; ") + (st.ok() ? fmt::format("{} has no device", p->file) : st.message());
    }
    if (notes.empty()) return invalidArgument("no NCCL net plugin configured or found");
    return systemError("{}", notes);
  }
  for (LoadedPlugin* p : plugins)
    if (strcasecmp(p->calls->name(), name.c_str()) == 0) return makeProviderFrom(p, out);
  LoadedPlugin* byFile = nullptr;
  Status st = openPlugin(name, &byFile);
  if (st.ok()) return makeProviderFrom(byFile, out);
  std::string found;
  for (LoadedPlugin* p : plugins) found += fmt::format("{}'{}' ({})", found.empty() ? "" : ", ", p->calls->name(), p->file);
  return invalidArgument("no network provider named '{}': it is none of {}, no configured NCCL net plugin "
                         "reports that name{}{}, and {}",
                         name, providerWords(), found.empty() ? "" : " (plugins: " + found + ")",
                         failures.empty() ? "" : " (" + failures + ")", st.message());
}

}  // namespace loom::net::plugin
