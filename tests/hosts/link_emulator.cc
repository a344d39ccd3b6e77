// loom-link-emulator: a small Ethernet switch in user space that delays and drops frames, for test beds
// on kernels without tc netem (scripts/hosts.sh uses it for `up --impair` when netem is missing).
// It makes N TAP devices (tap1..tapN) that hosts.sh moves into the hosts' network namespaces as eth0;
// every frame a host sends is dropped with the given probability, else delivered to the port its
// destination MAC was learned on (or to every other port) after the given delay, in order.
//
// usage: loom-link-emulator --ports N [--delay-us D] [--loss-ppm P]
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Frame {
  std::vector<char> bytes;
  Clock::time_point due;
};

struct Port {
  int fd = -1;
  std::deque<Frame> out;
};

int openTap(const std::string& name) {
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  ifreq req{};
  req.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::snprintf(req.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (ioctl(fd, TUNSETIFF, &req) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

uint64_t macAt(const char* p) {
  uint64_t mac = 0;
  std::memcpy(&mac, p, 6);
  return mac;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"user-space switch that delays and drops frames between TAP ports"};
  int nports = 0;
  int64_t delayUs = 0, lossPpm = 0;
  app.add_option("--ports", nports, "TAP ports tap1..tapN")->required()->check(CLI::Range(2, 64));
  app.add_option("--delay-us", delayUs, "delay of every frame")->check(CLI::Range(int64_t{0}, int64_t{10'000'000}));
  app.add_option("--loss-ppm", lossPpm, "frames dropped per million")->check(CLI::Range(int64_t{0}, int64_t{1'000'000}));
  CLI11_PARSE(app, argc, argv);

  std::vector<Port> ports(nports);
  for (int i = 0; i < nports; ++i) {
    ports[i].fd = openTap("tap" + std::to_string(i + 1));
    if (ports[i].fd < 0) {
      std::perror("loom-link-emulator: TUNSETIFF");
      return 1;
    }
  }
  std::printf("ready\n");
  std::fflush(stdout);

  std::mt19937_64 random(std::random_device{}());
  std::uniform_int_distribution<int64_t> perMillion(0, 999'999);
  std::map<uint64_t, int> learned;  // source MAC -> port
  std::vector<char> buffer(65536);
  std::vector<pollfd> polls(nports);
  const auto delay = std::chrono::microseconds(delayUs);
  for (;;) {
    const auto now = Clock::now();
    auto next = Clock::time_point::max();
    for (int i = 0; i < nports; ++i) {
      Port& p = ports[i];
      while (!p.out.empty() && p.out.front().due <= now) {
        const ssize_t w = write(p.fd, p.out.front().bytes.data(), p.out.front().bytes.size());
        if (w < 0 && errno == EAGAIN) break;
        p.out.pop_front();  // written, or refused for good (the host's link is down): dropped like a wire would
      }
      if (!p.out.empty()) next = std::min(next, p.out.front().due);
      polls[i] = pollfd{p.fd, POLLIN, 0};
    }
    timespec ts{1, 0};
    if (next != Clock::time_point::max()) {
      const auto wait = std::max<Clock::duration>(next - now, Clock::duration::zero());
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
      ts = timespec{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    }
    if (ppoll(polls.data(), polls.size(), &ts, nullptr) < 0 && errno != EINTR) return 1;
    for (int i = 0; i < nports; ++i) {
      if (!(polls[i].revents & POLLIN)) continue;
      for (;;) {
        const ssize_t n = read(ports[i].fd, buffer.data(), buffer.size());
        if (n < 14) break;  // EAGAIN, or not an Ethernet frame
        learned[macAt(buffer.data() + 6)] = i;
        if (perMillion(random) < lossPpm) continue;
        const auto due = Clock::now() + delay;
        const uint64_t dst = macAt(buffer.data());
        auto it = (buffer[0] & 1) ? learned.end() : learned.find(dst);
        for (int o = 0; o < nports; ++o) {
          if (o == i || (it != learned.end() && it->second != o)) continue;
          ports[o].out.push_back(Frame{std::vector<char>(buffer.begin(), buffer.begin() + n), due});
        }
      }
    }
  }
}
