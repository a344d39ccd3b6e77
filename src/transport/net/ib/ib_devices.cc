#include "transport/net/ib/ib_devices.h"

#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace loom::net::ib {

namespace {

// Gb/s per lane for ibv_port_attr::active_speed, and lanes for active_width (IB spec encodings).
int laneMbps(uint8_t speed) {
  switch (speed) {
    case 1: return 2500;     // SDR
    case 2: return 5000;     // DDR
    case 4: return 10000;    // QDR
    case 8: return 10000;    // FDR10
    case 16: return 14000;   // FDR
    case 32: return 25000;   // EDR
    case 64: return 50000;   // HDR
    case 128: return 100000; // NDR
    default: return 0;
  }
}

int lanes(uint8_t width) {
  switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

const char* stateName(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "NOP";
  }
}

std::string pciPathOf(ibv_device* device) {
  if (device->ibdev_path[0] == '\0') return "";
  char resolved[PATH_MAX];
  const std::string link = std::string(device->ibdev_path) + "/device";
  return realpath(link.c_str(), resolved) ? std::string(resolved) : std::string();
}

}  // namespace

int mtuBytes(ibv_mtu mtu) { return 128 << static_cast<int>(mtu); }

Status IbDevice::open(std::shared_ptr<const VerbsApi> api, ibv_device* device, std::shared_ptr<IbDevice>* out) {
  std::shared_ptr<IbDevice> d(new IbDevice());
  d->api_ = std::move(api);
  const char* name = d->api_->getDeviceName(device);
  d->name_ = name ? name : "?";
  errno = 0;
  d->context_ = d->api_->openDevice(device);
  if (!d->context_) return systemError("ibv_open_device({}): {}", d->name_, std::strerror(errno ? errno : ENODEV));
  if (d->api_->queryDevice(d->context_, &d->attributes_) != 0)
    return systemError("ibv_query_device({}): {}", d->name_, std::strerror(errno));
  d->pd_ = d->api_->allocPd(d->context_);
  if (!d->pd_) return systemError("ibv_alloc_pd({}): {}", d->name_, std::strerror(errno ? errno : ENOMEM));
  d->registry_ = std::make_unique<MemoryRegistry>(d->api_, d->pd_);
  *out = std::move(d);
  return Status::Ok();
}

IbDevice::~IbDevice() {
  registry_.reset();
  if (pd_) api_->deallocPd(pd_);
  if (context_) api_->closeDevice(context_);
}

Status discoverPorts(std::shared_ptr<const VerbsApi> api, const IbConfig& config, std::vector<IbPort>* ports,
                     std::string* report) {
  ports->clear();
  report->clear();
  auto note = [&](const std::string& s) { *report += (report->empty() ? "" : "; ") + s; };
  int count = 0;
  errno = 0;
  ibv_device** list = api->getDeviceList(&count);
  if (!list) {
    // libibverbs without the kernel's RDMA support answers ENOSYS.
    note(fmt::format("ibv_get_device_list: {}", std::strerror(errno ? errno : ENODEV)));
    return Status::Ok();
  }
  for (int i = 0; i < count; ++i) {
    const char* rawName = api->getDeviceName(list[i]);
    const std::string name = rawName ? rawName : "?";
    std::shared_ptr<IbDevice> device;
    Status st = IbDevice::open(api, list[i], &device);
    if (!st.ok()) {
      note(st.message());
      continue;
    }
    device->setGpuMemory(probeGpuMemorySupport(*api, device->pd(), config.dmabufEnable));
    for (int p = 1; p <= device->attributes().phys_port_cnt; ++p) {
      if (!config.hca.matches(name, p)) {
        note(fmt::format("{} port {}: left out by LOOM_IB_HCA={}", name, p, config.hcaSpec));
        continue;
      }
      ibv_port_attr attr{};
      if (api->queryPort(device->context(), static_cast<uint8_t>(p), &attr) != 0) {
        note(fmt::format("{} port {}: ibv_query_port: {}", name, p, std::strerror(errno)));
        continue;
      }
      if (attr.state != IBV_PORT_ACTIVE) {
        note(fmt::format("{} port {}: {}", name, p, stateName(attr.state)));
        continue;
      }
      IbPort port;
      port.device = device;
      port.port = p;
      port.ethernet = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
      port.lid = attr.lid;
      port.mtu = attr.active_mtu;
      std::vector<GidEntry> table;
      readGidTable(*api, device->context(), name, p, attr.gid_tbl_len, &table);
      std::string why;
      st = chooseGid(table, port.ethernet, config.gidIndex, &port.gid, &why);
      if (!st.ok()) {
        note(fmt::format("{} port {}: {}", name, p, st.message()));
        continue;
      }
      DeviceProperties& props = port.props;
      props.name = name;
      props.pciPath = pciPathOf(list[i]);
      props.guid = device->attributes().node_guid;
      props.ptrSupport = kHostPointers | (device->gpuMemory().peermem ? kCudaPointers : 0) |
                         (device->gpuMemory().dmabuf ? kDmabufPointers : 0);
      // The cache makes a registration free only inside one still held; the net transport would
      // register every direct send anew (ibv_reg_mr per message), so it sends from its registered
      // slots instead. Keeping registrations past their release needs memory hooks (freed memory).
      props.regIsGlobal = false;
      props.hostNeedsRegistration = true;
      const int mbps = laneMbps(attr.active_speed) * lanes(attr.active_width);
      props.speedMbps = mbps > 0 ? mbps : 10000;  // a soft device may report no rate
      props.port = p;
      props.latencyUs = 0;
      props.maxComms = 65536;
      props.maxRecvs = 1;
      props.maxMessageBytes = (size_t{1} << 31) - 1;  // the immediate carries the size
      LOOM_INFO(Net, "ib: {} port {}: {}, {} Mb/s, MTU {}, {}; GPU memory: {}", name, p,
                port.ethernet ? "RoCE" : "InfiniBand", props.speedMbps, mtuBytes(port.mtu),
                port.ethernet ? fmt::format("GID {} {} ({})", port.gid.index, gidText(port.gid.gid), why)
                              : fmt::format("LID {}", port.lid),
                device->gpuMemory().why);
      ports->push_back(std::move(port));
    }
  }
  api->freeDeviceList(list);
  if (count == 0) note("no RDMA device");
  return Status::Ok();
}

}  // namespace loom::net::ib
