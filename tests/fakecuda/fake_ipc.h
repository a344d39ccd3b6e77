// CUDA IPC between processes, on host memory: cudaMalloc's memory lives in a memfd of its own (shared
// memory that another process can map), an IPC handle names the exporting process, the descriptor and
// the allocation's number, and cudaIpcOpenMemHandle in another process maps that descriptor through
// /proc/<pid>/fd. As with the runtime, a handle opened again in one process gives the same mapping and
// counts the opens (fake_runtime.cc); a handle opened in the process that made it, or naming memory
// that is gone, is refused.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace fakecuda {

// Shared memory for a cudaMalloc: `bytes` (a multiple of the page size) mapped read-write, its
// descriptor in *fd and a number unique in this process in *id. Null when the system refuses.
void* mapSharedBlock(size_t bytes, int* fd, uint64_t* id);
void unmapSharedBlock(void* base, size_t bytes, int fd);

cudaIpcMemHandle_t handleOf(int fd, uint64_t id, size_t bytes);
// What names the exporter's allocation (its process and number): cudaErrorInvalidValue for a handle
// this fake did not make, cudaErrorDeviceUninitialized for one of the calling process.
cudaError_t handleKey(const cudaIpcMemHandle_t& handle, uint64_t key[2]);
// Maps the memory another process's handle names: *base and *bytes, or the runtime's error.
cudaError_t mapHandle(const cudaIpcMemHandle_t& handle, void** base, size_t* bytes);

}  // namespace fakecuda
