#include "device/comm_device.h"

namespace loom::device {

std::unique_ptr<CommDevice> makeCommDevice(CommFacts facts) { return std::make_unique<CudaCommDevice>(std::move(facts)); }

}  // namespace loom::device
