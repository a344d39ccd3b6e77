// "Same process" (ranks that share an address space, and so exchange raw pointers) is decided by host,
// pid and a per-process random nonce: two containers on one host with their own PID namespaces can
// both run a pid 1, and taking the other's pointers as our own would crash.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/process_identity.h"
#include "transport/transport_set.h"

namespace loom {
namespace {

TEST(ProcessIdentity, TheNonceIsStableInAProcessAndNewInAForkedChild) {
  const ProcessIdentity a = thisProcess(), b = thisProcess();
  EXPECT_EQ(a.nonce, b.nonce);
  EXPECT_NE(a.nonce, 0u);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    const uint64_t nonce = thisProcess().nonce;
    const ssize_t n = write(fds[1], &nonce, sizeof nonce);
    _exit(n == sizeof nonce ? 0 : 1);
  }
  uint64_t childNonce = 0;
  ASSERT_EQ(read(fds[0], &childNonce, sizeof childNonce), static_cast<ssize_t>(sizeof childNonce));
  int status = 0;
  waitpid(child, &status, 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_NE(childNonce, a.nonce);
}

TEST(ProcessIdentity, APidAloneDoesNotMakeTheSameProcess) {
  const ProcessIdentity here{7, 1, 0x1234, "host"};
  const ProcessIdentity twin{7, 1, 0x1234, "host"};
  const ProcessIdentity otherNamespace{7, 1, 0x9876, "host"};  // same host, same pid, another container
  EXPECT_EQ(selectTransport(here, twin, ""), TransportKind::Local);
  EXPECT_EQ(selectTransport(here, otherNamespace, ""), TransportKind::Shm);
  EXPECT_FALSE(here.sameProcess(otherNamespace));
  const ProcessIdentity otherHost{8, 1, 0x1234, "far"};
  EXPECT_EQ(selectTransport(here, otherHost, ""), TransportKind::Net);
}

}  // namespace
}  // namespace loom
