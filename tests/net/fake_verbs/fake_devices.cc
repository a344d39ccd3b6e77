// FakeVerbs' devices, contexts, protection domains and memory regions. The devices are described by
// LOOM_FAKE_VERBS_DEVICES, read at each ibv_get_device_list: a comma list of name:state:link with state
// "active" or "down" and link "eth" (RoCE: GIDs fe80 v1, fe80 v2, ::ffff:10.99.0.N v1, ::ffff:10.99.0.N
// v2, then four empty entries) or "ib" (LID, GID 0). "none" is a machine whose kernel has no RDMA:
// no list, errno ENOSYS, as Debian's libibverbs answers there.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "fake_verbs.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

namespace fakeverbs {

Fabric& fabric() {
  static Fabric* f = new Fabric();  // never destroyed: library objects may outlive static destructors
  return *f;
}

namespace {

constexpr const char* kDefaultDevices = "fakeroce0:active:eth,fakeib0:active:ib,fakedown0:down:eth";

FakeDevice* deviceFor(Fabric& f, const std::string& name, bool active, bool ethernet) {
  auto it = f.devices.find(name);
  if (it != f.devices.end()) {
    it->second->active = active;
    return it->second;
  }
  auto* d = new FakeDevice();
  const int n = static_cast<int>(f.devices.size()) + 1;
  d->name = name;
  std::strncpy(d->device.name, name.c_str(), sizeof d->device.name - 1);
  std::strncpy(d->device.dev_name, name.c_str(), sizeof d->device.dev_name - 1);
  d->device.node_type = IBV_NODE_CA;
  d->device.transport_type = IBV_TRANSPORT_IB;
  d->active = active;
  d->ethernet = ethernet;
  d->guid = 0x0200'0000'0000'0000ull | static_cast<uint64_t>(n);
  ibv_gid linkLocal{};
  linkLocal.raw[0] = 0xfe;
  linkLocal.raw[1] = 0x80;
  std::memcpy(linkLocal.raw + 8, &d->guid, 8);
  if (ethernet) {
    ibv_gid v4{};
    v4.raw[10] = v4.raw[11] = 0xff;
    v4.raw[12] = 10, v4.raw[13] = 99, v4.raw[14] = 0, v4.raw[15] = static_cast<uint8_t>(n);
    d->gids = {{linkLocal, IBV_GID_TYPE_ROCE_V1}, {linkLocal, IBV_GID_TYPE_ROCE_V2}, {v4, IBV_GID_TYPE_ROCE_V1},
               {v4, IBV_GID_TYPE_ROCE_V2}};
    d->gidTableLength = 8;
    d->mtu = IBV_MTU_1024;
  } else {
    d->gids = {{linkLocal, IBV_GID_TYPE_IB}};
    d->gidTableLength = 1;
    d->lid = static_cast<uint16_t>(n);
    d->mtu = IBV_MTU_4096;
  }
  f.devices[name] = d;
  return d;
}

}  // namespace
}  // namespace fakeverbs

using namespace fakeverbs;

extern "C" {

ibv_device** ibv_get_device_list(int* count) {
  const char* env = std::getenv("LOOM_FAKE_VERBS_DEVICES");
  const std::string spec = env && *env ? env : kDefaultDevices;
  if (count) *count = 0;
  if (spec == "none") {
    errno = ENOSYS;
    return nullptr;
  }
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  std::vector<ibv_device*> list;
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t a = item.find(':'), b = item.find(':', a == std::string::npos ? a : a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string state = item.substr(a + 1, b - a - 1), link = item.substr(b + 1);
    list.push_back(&deviceFor(f, item.substr(0, a), state == "active", link != "ib")->device);
  }
  auto** out = static_cast<ibv_device**>(std::calloc(list.size() + 1, sizeof(ibv_device*)));
  for (size_t i = 0; i < list.size(); ++i) out[i] = list[i];
  if (count) *count = static_cast<int>(list.size());
  return out;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* device) { return reinterpret_cast<FakeDevice*>(device)->name.c_str(); }

ibv_context* ibv_open_device(ibv_device* device) {
  auto* c = new FakeContext();
  c->device = reinterpret_cast<FakeDevice*>(device);
  c->context.device = device;
  c->context.cmd_fd = -1;
  c->context.async_fd = -1;
  c->context.num_comp_vectors = 1;
  c->context.abi_compat = nullptr;  // not an extended context: the header's extended inlines say "unsupported"
  c->context.ops.post_send = postSend;
  c->context.ops.post_recv = postRecv;
  c->context.ops.poll_cq = pollCq;
  c->context.ops.req_notify_cq = requestNotify;
  std::lock_guard<std::mutex> guard(fabric().lock);
  ++fabric().live;
  return &c->context;
}

int ibv_close_device(ibv_context* context) {
  delete reinterpret_cast<FakeContext*>(context);
  std::lock_guard<std::mutex> guard(fabric().lock);
  --fabric().live;
  return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  const FakeDevice& d = *reinterpret_cast<FakeContext*>(context)->device;
  *attr = ibv_device_attr{};
  std::strncpy(attr->fw_ver, "fake-1.0", sizeof attr->fw_ver - 1);
  attr->node_guid = d.guid;
  attr->max_mr_size = uint64_t{1} << 40;
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = 1 << 14;
  attr->max_sge = 8;
  attr->max_cq = 1 << 16;
  attr->max_cqe = 1 << 20;
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 10;
  attr->max_qp_rd_atom = 16;
  attr->max_qp_init_rd_atom = 16;
  attr->phys_port_cnt = 1;
  return 0;
}

// The header declares the compat struct; the library (like rdma-core's) fills a whole ibv_port_attr.
int ibv_query_port(ibv_context* context, uint8_t port, _compat_ibv_port_attr* compat) {
  const FakeDevice& d = *reinterpret_cast<FakeContext*>(context)->device;
  if (port != 1) return EINVAL;
  auto* attr = reinterpret_cast<ibv_port_attr*>(compat);
  const bool active = d.active.load();
  attr->state = active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = d.mtu;
  attr->gid_tbl_len = d.gidTableLength;
  attr->max_msg_sz = 1u << 31;
  attr->pkey_tbl_len = 1;
  attr->lid = d.lid;
  attr->active_width = 2;                    // 4 lanes
  attr->active_speed = d.ethernet ? 32 : 64;  // EDR (100 Gb/s) or HDR (200 Gb/s)
  attr->phys_state = active ? 5 : 3;
  attr->link_layer = d.ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

int ibv_query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  const FakeDevice& d = *reinterpret_cast<FakeContext*>(context)->device;
  if (port != 1 || index < 0 || index >= d.gidTableLength) return -1;
  *gid = index < static_cast<int>(d.gids.size()) ? d.gids[static_cast<size_t>(index)].gid : ibv_gid{};
  return 0;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags,
                      size_t entrySize) {
  (void)flags;
  const FakeDevice& d = *reinterpret_cast<FakeContext*>(context)->device;
  if (port != 1 || entrySize < sizeof(ibv_gid_entry) || index >= static_cast<uint32_t>(d.gidTableLength)) return EINVAL;
  if (index >= d.gids.size()) return ENODATA;
  *entry = ibv_gid_entry{};
  entry->gid = d.gids[index].gid;
  entry->gid_index = index;
  entry->port_num = port;
  entry->gid_type = d.gids[index].type;
  return 0;
}

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  auto* pd = new ibv_pd();
  pd->context = context;
  std::lock_guard<std::mutex> guard(fabric().lock);
  ++fabric().live;
  return pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  delete pd;
  std::lock_guard<std::mutex> guard(fabric().lock);
  --fabric().live;
  return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  if (f.faults.regMrNoMemory > 0) {
    --f.faults.regMrNoMemory;
    errno = ENOMEM;
    return nullptr;
  }
  if (!addr || length == 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* m = new FakeMr();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = m->mr.rkey = f.nextKey++;
  m->access = access;
  f.mrs[m->mr.lkey] = m;
  ++f.live;
  return &m->mr;
}

// A dmabuf is an fd for memory a device exports; the fake takes any fd it can map shared (a memfd in
// the tests), so that what the fabric writes through the MR lands where the fd's other mappings see it.
// fd -1 answers EBADF, which is how NCCL and the provider probe for support without memory.
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  if (f.faults.dmabufUnsupported > 0) {
    --f.faults.dmabufUnsupported;
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (fd < 0) {
    errno = EBADF;
    return nullptr;
  }
  if (length == 0) {
    errno = EINVAL;
    return nullptr;
  }
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t slack = offset % page;
  void* map = mmap(nullptr, length + slack, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset - slack));
  if (map == MAP_FAILED) return nullptr;  // errno from mmap
  auto* m = new FakeMr();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = reinterpret_cast<void*>(iova);
  m->mr.length = length;
  m->mr.lkey = m->mr.rkey = f.nextKey++;
  m->access = access;
  m->mapping = static_cast<char*>(map) + slack;
  m->mapSlack = slack;
  f.mrs[m->mr.lkey] = m;
  ++f.live;
  return &m->mr;
}

int ibv_dereg_mr(ibv_mr* mr) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> guard(f.lock);
  f.mrs.erase(mr->lkey);
  auto* m = reinterpret_cast<FakeMr*>(mr);
  if (m->mapping) munmap(m->mapping - m->mapSlack, m->mr.length + m->mapSlack);
  delete m;
  --f.live;
  return 0;
}

}  // extern "C"
