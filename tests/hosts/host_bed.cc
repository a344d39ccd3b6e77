#include "host_bed.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loomtest {

namespace {

// For the signal handler: takes down every bed of this process (hosts.sh down-owner PID).
char gDownArgs[3][128];
volatile sig_atomic_t gBedsUp = 0;
// The process that made the beds. Rank processes forked from it inherit the handler; one that aborts
// or is sent SIGTERM must not take down the beds the test process and the other ranks still use.
volatile sig_atomic_t gOwnerPid = 0;

int runScript(const std::string& args) {
  const std::string cmd = "bash '" + hostsScript() + "' " + args + " 2>&1";
  return std::system(cmd.c_str());
}

void takeDownOnSignal(int sig) {
  if (gBedsUp && getpid() == gOwnerPid) {
    gBedsUp = 0;
    const pid_t pid = fork();  // async-signal-safe: exec the script and wait for it
    if (pid == 0) {
      char* argv[] = {const_cast<char*>("bash"), gDownArgs[0], gDownArgs[1], gDownArgs[2], nullptr};
      execvp("bash", argv);
      _exit(127);
    }
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

std::string errnoText(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

std::string hostsScript() {
  const char* path = std::getenv("LOOM_HOSTS_SH");
  return path ? path : "scripts/hosts.sh";
}

std::unique_ptr<HostBed> HostBed::create(int hosts, const std::string& impair, std::string* why, bool* unsupported) {
  *unsupported = false;
  runScript("gc >/dev/null");
  const std::string check = "bash '" + hostsScript() + "' check 2>&1";
  if (FILE* p = popen(check.c_str(), "r")) {
    char line[512] = {0};
    std::string out;
    while (fgets(line, sizeof line, p)) out += line;
    const int status = pclose(p);
    if (status != 0) {
      *unsupported = WIFEXITED(status) && WEXITSTATUS(status) == 2;
      *why = "namespaces cannot be made here: " + out;
      return nullptr;
    }
  }
  // One bed per test binary, and one more for an impaired one: the name says which.
  const std::string bed = (impair.empty() ? "t" : "i") + std::to_string(getpid() % 1000000);
  std::string up = "up " + std::to_string(hosts) + " --bed " + bed + " --owner " + std::to_string(getpid());
  if (!impair.empty()) up += " --impair '" + impair + "'";
  if (runScript(up) != 0) {
    *why = "hosts.sh " + up + " failed";
    return nullptr;
  }
  std::snprintf(gDownArgs[0], sizeof gDownArgs[0], "%s", hostsScript().c_str());
  std::snprintf(gDownArgs[1], sizeof gDownArgs[1], "down-owner");
  std::snprintf(gDownArgs[2], sizeof gDownArgs[2], "%d", static_cast<int>(getpid()));
  ++gBedsUp;
  gOwnerPid = static_cast<sig_atomic_t>(getpid());
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGABRT}) signal(sig, takeDownOnSignal);
  return std::unique_ptr<HostBed>(new HostBed(bed, hosts));
}

HostBed::~HostBed() {
  runScript("down --bed " + bed_);
  if (gBedsUp > 0) --gBedsUp;
}

std::string HostBed::hostName(int host) const { return bed_ + "-h" + std::to_string(host + 1); }

std::string HostBed::enter(int host) const {
  const std::string name = hostName(host);
  const int fd = open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errnoText(("open /run/netns/" + name).c_str());
  const int joined = setns(fd, CLONE_NEWNET);
  close(fd);
  if (joined != 0) return errnoText("setns(net)");
  if (unshare(CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNS) != 0) return errnoText("unshare(uts, ipc, mount)");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errnoText("mount --make-rprivate /");
  if (sethostname(name.c_str(), name.size()) != 0) return errnoText("sethostname");
  const std::string hosts = "/run/loom-beds/" + bed_ + "/hosts";
  if (mount(hosts.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) != 0) return errnoText("bind the bed's /etc/hosts");
  const std::string shm = "/run/loom-beds/" + bed_ + "/h" + std::to_string(host + 1);
  if (mount(shm.c_str(), "/dev/shm", nullptr, MS_BIND, nullptr) != 0) return errnoText("bind the host's /dev/shm");
  if (mount("sysfs", "/sys", "sysfs", 0, nullptr) != 0) return errnoText("mount the host's /sys");
  return "";
}

std::string HostBed::netem(int host, const std::string& args) const {
  return runScript("netem " + hostName(host) + " " + args) == 0 ? "" : "hosts.sh netem " + args + " failed";
}

std::string HostBed::setLink(int host, bool up) const {
  return runScript("link " + hostName(host) + (up ? " up" : " down")) == 0 ? "" : "hosts.sh link failed";
}

int HostBed::run(int host, const std::string& command) const {
  const int status = runScript("exec " + hostName(host) + " " + command);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace loomtest
