// "Same process" (ranks that share an address space, and so exchange raw pointers) is decided by host,
// pid and a per-process random nonce: two containers on one host with their own PID namespaces can
// both run a pid 1, and taking the other's pointers as our own would crash.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap/host_identity.h"
#include "transport/transport_set.h"

namespace loom {
namespace {

TEST(ProcessIdentity, TheNonceIsStableInAProcessAndNewInAForkedChild) {
  const RankInfo a = describeThisProcess(), b = describeThisProcess();
  EXPECT_EQ(a.processNonce, b.processNonce);
  EXPECT_NE(a.processNonce, 0u);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    const uint64_t nonce = describeThisProcess().processNonce;
    const ssize_t n = write(fds[1], &nonce, sizeof nonce);
    _exit(n == sizeof nonce ? 0 : 1);
  }
  uint64_t childNonce = 0;
  ASSERT_EQ(read(fds[0], &childNonce, sizeof childNonce), static_cast<ssize_t>(sizeof childNonce));
  int status = 0;
  waitpid(child, &status, 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_NE(childNonce, a.processNonce);
}

TEST(ProcessIdentity, APidAloneDoesNotMakeTheSameProcess) {
  const PeerLocation here{7, 1, "host", 0x1234};
  const PeerLocation twin{7, 1, "host", 0x1234};
  const PeerLocation otherNamespace{7, 1, "host", 0x9876};  // same host, same pid, another container
  EXPECT_EQ(selectTransport(here, twin, ""), TransportKind::Local);
  EXPECT_EQ(selectTransport(here, otherNamespace, ""), TransportKind::Shm);
  EXPECT_FALSE(here.sameProcess(otherNamespace));
  const PeerLocation otherHost{8, 1, "far", 0x1234};
  EXPECT_EQ(selectTransport(here, otherHost, ""), TransportKind::Net);
}

}  // namespace
}  // namespace loom
