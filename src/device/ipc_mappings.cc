#include "device/ipc_mappings.h"

#include <map>
#include <mutex>
#include <string>

#include "device/memory_kind.h"

namespace loom::device {
namespace {

struct Mapping {
  char* address = nullptr;
  int users = 0;
};

struct MappingTable {
  std::mutex mutex;
  std::map<std::string, Mapping> byHandle;
};

MappingTable& table() {
  static auto* t = new MappingTable;  // never destroyed: communicators may outlive statics
  return *t;
}

std::string keyOf(const cudaIpcMemHandle_t& h) { return std::string(h.reserved, sizeof h.reserved); }

}  // namespace

Status openIpcMapping(const cudaIpcMemHandle_t& handle, char** out) {
  MappingTable& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto [it, fresh] = t.byHandle.try_emplace(keyOf(handle));
  if (fresh) {
    void* mapped = nullptr;
    const cudaError_t err = cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      cudaGetLastError();
      t.byHandle.erase(it);
      return cudaStatus(err, "cudaIpcOpenMemHandle");
    }
    it->second.address = static_cast<char*>(mapped);
  }
  ++it->second.users;
  *out = it->second.address;
  return Status::Ok();
}

void closeIpcMapping(char* address) {
  MappingTable& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  for (auto it = t.byHandle.begin(); it != t.byHandle.end(); ++it)
    if (it->second.address == address && --it->second.users == 0) {
      cudaIpcCloseMemHandle(address);
      t.byHandle.erase(it);
      return;
    }
}

}  // namespace loom::device
