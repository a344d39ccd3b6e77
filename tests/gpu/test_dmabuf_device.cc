// GPU memory exported as a dmabuf fd (device_layer.h's exportDmabuf), what a NIC registers for
// GPUDirect RDMA without nvidia-peermem. The GPU machines have no NIC, so registration itself is not
// tested here (tests/net does it over FakeVerbs); this checks the CUDA side: a cudaMalloc buffer's
// allocation comes back as a dmabuf fd whose kernel-side size covers it, with the buffer's offset.
// Skips without a GPU, and with the driver's reason where it exports no dmabufs.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "device/device_layer.h"
#include "gpu_support.h"

namespace loomgpu {
namespace {

// The dma-buf's fields as the kernel shows them in /proc/self/fdinfo ("size:", "exp_name:").
std::string fdinfoField(int fd, const std::string& field) {
  std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) {
      std::string value = line.substr(field.size() + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  return "";
}

TEST(DmabufExport, CudaMallocBufferBecomesADmabufFd) {
  LOOM_REQUIRE_GPU();
  cudaCheck(cudaSetDevice(0), "cudaSetDevice");
  std::string why;
  if (!loom::device::dmabufExportable(0, &why)) GTEST_SKIP() << "GPU 0 exports no dmabufs: " << why;
  constexpr size_t kBytes = 8 << 20;
  void* block = nullptr;
  cudaCheck(cudaMalloc(&block, kBytes), "cudaMalloc");
  const char* buffer = static_cast<const char*>(block) + 4096 + 100;
  loom::device::DmabufRange range;
  const loom::Status st = loom::device::exportDmabuf(buffer, 1 << 20, &range);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_GE(range.fd, 0);
  EXPECT_EQ(range.base, block);
  EXPECT_GE(range.bytes, kBytes);
  EXPECT_EQ(range.offset, 4096u + 100u);
  const std::string size = fdinfoField(range.fd, "size");
  const std::string exporter = fdinfoField(range.fd, "exp_name");
  std::printf("dmabuf of a %zu-byte cudaMalloc buffer: fd %d, allocation %zu bytes, offset %llu, kernel size %s, "
              "exporter %s\n",
              kBytes, range.fd, range.bytes, static_cast<unsigned long long>(range.offset), size.c_str(),
              exporter.c_str());
  ASSERT_FALSE(size.empty()) << "fd " << range.fd << " is not a dma-buf (no size in its fdinfo)";
  EXPECT_GE(std::stoull(size), kBytes);
  close(range.fd);
  cudaCheck(cudaFree(block), "cudaFree");
}

TEST(DmabufExport, HostMemoryIsRefused) {
  LOOM_REQUIRE_GPU();
  std::vector<char> host(4096);
  loom::device::DmabufRange range;
  const loom::Status st = loom::device::exportDmabuf(host.data(), host.size(), &range);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("not CUDA device memory"), std::string::npos) << st.message();
  EXPECT_EQ(range.fd, -1);
}

}  // namespace
}  // namespace loomgpu
