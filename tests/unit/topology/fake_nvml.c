/* A stand-in for libnvidia-ml.so.1 with the handful of entry points Loom's NVLink discovery uses, so
 * that code runs on machines without a GPU. Four GPUs at 0000:1N:00.0, compute capability 8.0:
 * GPU0 = GPU1 (2 links), GPU2 and GPU3 with 2 links each to an NVSwitch at 0000:c0:00.0 (NVIDIA vendor,
 * not in sysfs here), GPU1 with 1 link to an IBM bridge at 0000:ff:00.0 (a CPU). */
#include <stdio.h>
#include <string.h>

typedef struct {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} FakePciInfo;

static int fakeDevices[4];
static int initialized;

static void fill(FakePciInfo* pci, const char* busId, unsigned vendor) {
  memset(pci, 0, sizeof(*pci));
  snprintf(pci->busId, sizeof(pci->busId), "0000%s", busId); /* NVML's 8-digit domain */
  pci->pciDeviceId = 0x20b00000u | vendor;
}

static int index_of(void* dev) { return (int)((int*)dev - fakeDevices); }

int nvmlInit_v2(void) { initialized = 1; return 0; }
int nvmlShutdown(void) { initialized = 0; return 0; }
int nvmlDeviceGetCount_v2(unsigned* count) { *count = 4; return initialized ? 0 : 1; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** dev) {
  if (i >= 4) return 2;
  *dev = &fakeDevices[i];
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void* dev, FakePciInfo* pci) {
  char bus[16];
  snprintf(bus, sizeof(bus), "0000:1%d:00.0", index_of(dev));
  fill(pci, bus, 0x10de);
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(void* dev, int* major, int* minor) {
  (void)dev;
  *major = 8;
  *minor = 0;
  return 0;
}
static int links(int gpu) { return gpu == 1 ? 3 : 2; }
int nvmlDeviceGetNvLinkState(void* dev, unsigned link, int* active) {
  *active = (int)link < links(index_of(dev));
  return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* dev, unsigned link, FakePciInfo* pci) {
  int gpu = index_of(dev);
  if ((int)link >= links(gpu)) return 2;
  if (gpu == 0) fill(pci, "0000:11:00.0", 0x10de);
  else if (gpu == 1) fill(pci, link < 2 ? "0000:10:00.0" : "0000:ff:00.0", link < 2 ? 0x10de : 0x1014);
  else fill(pci, "0000:c0:00.0", 0x10de);
  return 0;
}
