// Which of a provider's devices a rank uses: LOOM_SOCKET_IFNAME's syntax when the user names one, else
// the topology's NIC for the rank (the one closest to its GPU or NUMA node), found by name or by PCI
// address, since a graph names an RDMA NIC by its verbs device (mlx5_0) and the socket provider by its
// interface (ib0). FakeNics is a test double of a provider with made-up devices; the real socket
// provider is checked on this machine's loopback interface.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transport/net/net_setup.h"
#include "transport/net/provider_choice.h"

namespace loom::net {
namespace {

class FakeNics : public Provider {
 public:
  explicit FakeNics(std::vector<DeviceProperties> devices) : devices_(std::move(devices)) {}
  const std::string& name() const override { return name_; }
  int deviceCount() const override { return static_cast<int>(devices_.size()); }
  Status deviceProperties(int device, DeviceProperties* out) const override {
    *out = devices_.at(static_cast<size_t>(device));
    return Status::Ok();
  }
  Status listen(int, Handle*, std::unique_ptr<ListenComm>*) override { return invalidArgument("FakeNics cannot listen"); }
  Status connect(int, Handle*, std::unique_ptr<SendComm>*) override { return invalidArgument("FakeNics cannot connect"); }

 private:
  std::string name_ = "fake";
  std::vector<DeviceProperties> devices_;
};

DeviceProperties nic(const std::string& name, const std::string& pciPath) {
  DeviceProperties p;
  p.name = name;
  p.pciPath = pciPath;
  return p;
}

FakeNics twoPortsAndAVirtualOne() {
  return FakeNics({nic("eth0", "/sys/devices/pci0000:00/0000:00:03.0"),
                   nic("ib0", "/sys/devices/pci0000:40/0000:40:01.0/0000:4b:00.0"), nic("veth1", "")});
}

TEST(NetDeviceChoice, TheTopologysNicByName) {
  FakeNics p = twoPortsAndAVirtualOne();
  EXPECT_EQ(findDevice(p, {"ib0", ""}), 1);
  EXPECT_EQ(findDevice(p, {"veth1", ""}), 2);
}

TEST(NetDeviceChoice, TheTopologysNicByPciAddressWhenNamesDiffer) {
  FakeNics p = twoPortsAndAVirtualOne();
  EXPECT_EQ(findDevice(p, {"mlx5_0", "0000:4b:00.0"}), 1);
  EXPECT_EQ(findDevice(p, {"mlx5_0", "0000:4B:00.0"}), 1);  // sysfs writes hex in lower case, some tools not
}

TEST(NetDeviceChoice, NoSuchNicIsMinusOne) {
  FakeNics p = twoPortsAndAVirtualOne();
  EXPECT_EQ(findDevice(p, {"mlx5_1", "0000:cc:00.0"}), -1);
  EXPECT_EQ(findDevice(p, {"", ""}), -1);  // an empty name matches no device, not the virtual one
  EXPECT_EQ(findDevice(p, {"eth", ""}), -1);  // names match whole, unlike LOOM_SOCKET_IFNAME's prefixes
}

TEST(NetDeviceChoice, UserSpecStillUsesIfnameSyntax) {
  FakeNics p = twoPortsAndAVirtualOne();
  int device = -1;
  ASSERT_TRUE(chooseDevice(p, "^eth", &device).ok());
  EXPECT_EQ(device, 1);
  Status st = chooseDevice(p, "=eth1", &device);
  EXPECT_EQ(st.code(), loomInvalidArgument);
  EXPECT_NE(st.message().find("eth0, ib0, veth1"), std::string::npos) << st.message();
}

TEST(NetDeviceChoice, RealSocketProviderFindsLoopbackByName) {
  std::unique_ptr<Provider> p;
  Status st = makeProvider({"socket", ""}, &p);
  ASSERT_TRUE(st.ok()) << st.message();
  const int device = findDevice(*p, {"lo", ""});
  ASSERT_GE(device, 0);
  DeviceProperties props;
  ASSERT_TRUE(p->deviceProperties(device, &props).ok());
  EXPECT_EQ(props.name, "lo");
}

}  // namespace
}  // namespace loom::net
