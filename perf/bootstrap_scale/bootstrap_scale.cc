// The bootstrap's load generator: one process plays N ranks spread over simulated hosts, each rank
// running the library's own bootstrap (src/bootstrap: the rendezvous, the per-host leaders, the tree of
// leaders) and then the setup exchanges (an allGather, a barrier), and reports how long that took and
// what the busiest party moved and held. Nothing else of a communicator is made (no topology, no
// transports): what it measures is the part of init that grows with the job.
//
// Each rank is a thread with a small stack, in one of several worker processes (whole simulated hosts
// each, --ranks-per-process: a process's descriptors allow about 6,000 ranks), listening on its simulated host's own loopback address
// (127.h.h.h), and presents its host's identity (ProcessIdentity: a host hash per simulated host, a
// process per rank), so the ranks of a host elect a leader and the leaders build their tree as ranks
// of real hosts do. The rendezvous runs on a thread of its own. A "party" is one rank or the
// rendezvous: its bytes and sockets are what one process would move and hold in a real job.
//
//   bootstrap-scale [--ranks 1024,4096,16384] [--ranks-per-host 8] [--ranks-per-process 4096] [--gather-bytes 8] [--json FILE]
//                   [--timeout-ms T] [--max-seconds S] [--max-sockets N] [--max-bytes B]
//                   [--model-within F] [--model-constants C]
//   bootstrap-scale --constants
//
// --max-*: exit 1 when a run's init (bootstrap and exchanges) takes longer than S seconds, or its
// busiest party held more than N sockets at once or moved more than B bytes (the bound test in CI).
// Each run also prints what the bootstrap's cost model (src/model/bootstrap_model.h) predicts for it:
// the busiest party's bytes and sockets, and this machine's time (every party's CPU over its cores,
// with --model-constants, as --constants printed them); --model-within F: exit 1 when the measured
// bytes differ from the prediction by more than the fraction F, or the sockets exceed its bound.
// --constants measures the model's constants on this machine and prints them.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/hash.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "constants.h"
#include "model/bootstrap_model.h"

namespace {

using loom::Bootstrap;
using loom::BootstrapTraffic;
using Clock = std::chrono::steady_clock;

constexpr size_t kRankStackBytes = 256 << 10;

struct Options {
  std::vector<int> ranks{1024, 4096};
  int ranksPerHost = 8;
  size_t gatherBytes = 8;
  std::string json;
  double maxSeconds = 0;
  int maxSockets = 0;
  double maxBytes = 0;
  int timeoutMs = 120000;
  int ranksPerProcess = 4096;  // a process's descriptors: about 3 per rank
  double modelWithin = 0;      // > 0: the measured load must be within this fraction of the model's
  std::string modelConstants;  // the model's constants (--constants printed them); "": its defaults
};

// Written by a rank of a worker process into memory shared with the parent (plain data).
struct RankResult {
  bool ok = false;
  bool leader = false;
  int depth = 0;  // of the rank's host in the tree of leaders
  char error[240] = {0};
  BootstrapTraffic traffic;
  double joinedS = 0, doneS = 0;  // since the start: the table in hand, the exchanges done
};

struct RankJob {
  const loom::UniqueIdData* id;
  int rank, nranks, ranksPerHost, timeoutMs;
  size_t gatherBytes;
  Clock::time_point start;
  RankResult* result;
};

// Simulated host h listens on 127.x.y.z with x.y.z = h + 2; the rendezvous (host -1) on 127.0.0.1.
loom::SocketAddress hostAddress(int host) {
  loom::SocketAddress a;
  a.family = AF_INET;
  const uint32_t v = 0x7f000000u | static_cast<uint32_t>(host + 2);
  a.addr[0] = static_cast<uint8_t>(v >> 24);
  a.addr[1] = static_cast<uint8_t>(v >> 16);
  a.addr[2] = static_cast<uint8_t>(v >> 8);
  a.addr[3] = static_cast<uint8_t>(v);
  return a;
}

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

loom::Status bootstrapRank(RankJob& job, RankResult* result);

void runRank(RankJob& job) {
  RankResult& out = *job.result;
  loom::Status st = bootstrapRank(job, &out);
  out.ok = st.ok();
  if (!out.ok) fmt::format_to_n(out.error, sizeof(out.error) - 1, "{}", st.message());
}

loom::Status bootstrapRank(RankJob& job, RankResult* result) {
  RankResult& out = *result;
  const int host = job.rank / job.ranksPerHost;
  loom::RankInfo self;
  self.listenAddress = hostAddress(host);
  self.process.hostHash = loom::Fnv1a(0x686f7374).value(host).digest();
  fmt::format_to_n(self.process.hostname, sizeof(self.process.hostname) - 1, "sim-host-{}", host);
  self.process.pid = job.rank + 1;  // a process per rank: no exchange through memory
  self.process.nonce = loom::Fnv1a(0x726e6b).value(job.rank).digest();
  std::unique_ptr<Bootstrap> b;
  LOOM_TRY(Bootstrap::create(*job.id, job.rank, job.nranks, self, job.timeoutMs, nullptr, &b));
  out.joinedS = secondsSince(job.start);
  out.leader = b->tree().isLeader();
  for (int h = b->tree().host; h > 0; h = loom::parentHost(h)) ++out.depth;
  // The setup exchanges: every rank's part gathered (checked), then a barrier. (--gather-bytes 0: the
  // barrier only; at 64k ranks each rank's gather result would be held by every thread at once.)
  if (job.gatherBytes == 0) {
    LOOM_TRY(b->barrier());
    out.doneS = secondsSince(job.start);
    out.traffic = b->traffic();
    return loom::Status::Ok();
  }
  std::vector<char> mine(job.gatherBytes), all(job.gatherBytes * static_cast<size_t>(job.nranks));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<char>(job.rank * 31 + i);
  LOOM_TRY(b->allGather(mine.data(), all.data(), mine.size()));
  for (int r = 0; r < job.nranks; ++r)
    for (size_t i = 0; i < job.gatherBytes; ++i)
      if (all[static_cast<size_t>(r) * job.gatherBytes + i] != static_cast<char>(r * 31 + i))
        return loom::errorStatus(loomInternalError, "allgather: rank {}'s part is wrong", r);
  std::vector<char>().swap(all);
  LOOM_TRY(b->barrier());
  out.doneS = secondsSince(job.start);
  out.traffic = b->traffic();
  return loom::Status::Ok();
}

void* rankThread(void* arg) {
  runRank(*static_cast<RankJob*>(arg));
  return nullptr;
}

// Each rank holds its listener and a few sockets; leaders hold their host's and their tree's.
void raiseDescriptorLimit(int nranks) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  const rlim_t want = static_cast<rlim_t>(nranks) * 4 + 1024;
  if (lim.rlim_max < want) {
    rlimit raised{want, want};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return;  // root may raise the hard limit
  }
  lim.rlim_cur = std::min(std::max(lim.rlim_cur, want), lim.rlim_max);
  setrlimit(RLIMIT_NOFILE, &lim);
}

// The largest worker's peak (RUSAGE_CHILDREN: the largest child waited for, this run's or before).
long maxRssKiB() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  return u.ru_maxrss;
}

// A worker process: ranks [first, last) as threads, once the parent says go (its byte on `go`).
void runWorker(const Options& o, const loom::UniqueIdData& id, int nranks, int first, int last, int go,
               const Clock::time_point* start, RankResult* results) {
  char byte = 0;
  if (::read(go, &byte, 1) != 1) _exit(2);
  std::vector<RankJob> jobs(static_cast<size_t>(last - first));
  std::vector<pthread_t> threads(jobs.size());
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kRankStackBytes);
  size_t started = 0;
  for (; started < jobs.size(); ++started) {
    const int r = first + static_cast<int>(started);
    jobs[started] = RankJob{&id, r, nranks, o.ranksPerHost, o.timeoutMs, o.gatherBytes, *start, &results[r]};
    if (pthread_create(&threads[started], &attr, rankThread, &jobs[started]) != 0) {
      std::fprintf(stderr, "bootstrap-scale: could not start rank thread %d of %d\n", r, nranks);
      break;
    }
  }
  for (size_t i = 0; i < started; ++i) pthread_join(threads[i], nullptr);
  std::fflush(stderr);
  _exit(0);
}

// Every rank is a thread, and every thread takes a pid: kernel.pid_max (often 32768) bounds a run.
bool enoughPids(int nranks) {
  long pidMax = 0, running = 0;
  if (FILE* f = std::fopen("/proc/sys/kernel/pid_max", "r")) {
    if (std::fscanf(f, "%ld", &pidMax) != 1) pidMax = 0;
    std::fclose(f);
  }
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {  // "a b c running/total last"
    double x = 0;
    long r = 0;
    if (std::fscanf(f, "%lf %lf %lf %ld/%ld", &x, &x, &x, &r, &running) != 5) running = 0;
    std::fclose(f);
  }
  if (pidMax == 0 || nranks + running + 1024 <= pidMax) return true;
  std::printf("%8d ranks: not run: %d rank threads and the %ld threads running need more pids than kernel.pid_max=%ld "
              "(as root: sysctl -w kernel.pid_max=%ld)\n",
              nranks, nranks, running, pidMax, 4 * static_cast<long>(nranks));
  return false;
}

nlohmann::json runOnce(const Options& o, int nranks, bool* withinBounds) {
  raiseDescriptorLimit(std::min(nranks, o.ranksPerProcess));
  loom::UniqueIdData id;
  for (size_t i = 0; i < loom::kSecretBytes; ++i) id.secret[i] = static_cast<uint8_t>(nranks * 7 + i);
  loom::Socket rootListener;
  loom::Status st = loom::listenOn(hostAddress(-1), &rootListener, &id.root);
  if (!st.ok()) throw std::runtime_error("rendezvous: " + st.message());

  // Results and the start time, in memory the workers share with this process.
  const size_t shared = sizeof(Clock::time_point) + sizeof(RankResult) * static_cast<size_t>(nranks);
  void* mem = mmap(nullptr, shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("mmap of the results failed");
  auto* start = new (mem) Clock::time_point();
  auto* results = reinterpret_cast<RankResult*>(static_cast<char*>(mem) + sizeof(Clock::time_point));
  for (int r = 0; r < nranks; ++r) new (&results[r]) RankResult();

  // Workers first (no thread runs in this process while it forks), each a slice of whole hosts.
  int goPipe[2];
  if (pipe(goPipe) != 0) throw std::runtime_error("pipe failed");
  const int perProcess = std::max(o.ranksPerHost, o.ranksPerProcess / o.ranksPerHost * o.ranksPerHost);
  std::vector<pid_t> workers;
  for (int first = 0; first < nranks; first += perProcess) {
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::close(goPipe[1]);
      rootListener.close();
      runWorker(o, id, nranks, first, std::min(nranks, first + perProcess), goPipe[0], start, results);
    }
    workers.push_back(pid);
  }
  ::close(goPipe[0]);
  BootstrapTraffic rootTraffic;
  // Every party's CPU: the workers (waited for) and the rendezvous' thread.
  auto everyPartysCpu = [] {
    using loom::bootstrap_scale::processCpuSeconds;
    return processCpuSeconds(RUSAGE_SELF) + processCpuSeconds(RUSAGE_CHILDREN);
  };
  const double cpuBefore = everyPartysCpu();
  *start = Clock::now();
  double rendezvousS = 0;  // every rank joined and host 0's leader has the table
  std::thread root([&] {
    loom::serveRendezvous(std::move(rootListener), id, &rootTraffic);
    rendezvousS = secondsSince(*start);
  });
  const std::string go(workers.size(), 'g');
  if (::write(goPipe[1], go.data(), go.size()) != static_cast<ssize_t>(go.size())) throw std::runtime_error("go failed");
  ::close(goPipe[1]);
  int crashed = 0;
  for (pid_t w : workers) {
    int status = 0;
    waitpid(w, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++crashed;
  }
  root.join();
  const double seconds = secondsSince(*start);
  const double cpuS = everyPartysCpu() - cpuBefore;
  const int started = nranks;
  if (crashed) std::printf("  %d worker processes ended badly\n", crashed);

  int failed = nranks - started, leaders = 0;
  std::string firstError;
  std::map<std::string, int> errors;  // how many ranks failed with each message
  double joinedS = 0;
  std::vector<double> tableByDepth;  // the last leader of each depth to have the table (s)
  BootstrapTraffic busiest = rootTraffic;
  std::string busiestWho = "the rendezvous";
  int socketsPeak = rootTraffic.socketsPeak;
  std::string socketsWho = "the rendezvous";
  for (int r = 0; r < started; ++r) {
    const RankResult& res = results[static_cast<size_t>(r)];
    if (!res.ok) {
      if (firstError.empty()) firstError = fmt::format("rank {}: {}", r, res.error[0] ? res.error : "no result");
      ++errors[res.error];
      ++failed;
      continue;
    }
    leaders += res.leader ? 1 : 0;
    joinedS = std::max(joinedS, res.joinedS);
    if (res.leader) {
      if (tableByDepth.size() <= static_cast<size_t>(res.depth)) tableByDepth.resize(static_cast<size_t>(res.depth) + 1, 0);
      tableByDepth[static_cast<size_t>(res.depth)] = std::max(tableByDepth[static_cast<size_t>(res.depth)], res.joinedS);
    }
    const BootstrapTraffic& t = res.traffic;
    if (t.bytesSent + t.bytesReceived > busiest.bytesSent + busiest.bytesReceived) {
      busiest = t;
      busiestWho = fmt::format("rank {}", r);
    }
    if (t.socketsPeak > socketsPeak) {
      socketsPeak = t.socketsPeak;
      socketsWho = fmt::format("rank {}", r);
    }
  }
  const double busiestBytes = static_cast<double>(busiest.bytesSent + busiest.bytesReceived);
  nlohmann::json row = {{"ranks", nranks},
                        {"ranks_per_host", o.ranksPerHost},
                        {"hosts", (nranks + o.ranksPerHost - 1) / o.ranksPerHost},
                        {"leaders", leaders},
                        {"failed", failed},
                        {"init_s", seconds},
                        {"rendezvous_s", rendezvousS},
                        {"table_s", joinedS},
                        {"leaders_table_s_by_depth", tableByDepth},
                        {"busiest_bytes", busiestBytes},
                        {"busiest_bytes_party", busiestWho},
                        {"rendezvous_bytes", static_cast<double>(rootTraffic.bytesSent + rootTraffic.bytesReceived)},
                        {"sockets_peak", socketsPeak},
                        {"sockets_peak_party", socketsWho},
                        {"processes", workers.size()},
                        {"worker_max_rss_mib", static_cast<double>(maxRssKiB()) / 1024.0},
                        {"gather_bytes", o.gatherBytes},
                        {"cpu_s", cpuS}};
  std::printf("%8d ranks %6d hosts  init %7.3f s (rendezvous %6.3f s, table %7.3f s)  busiest %10.0f B (%s)  sockets %4d (%s)  rss %6.0f MiB%s\n",
              nranks, row["hosts"].get<int>(), seconds, rendezvousS, joinedS, busiestBytes, busiestWho.c_str(), socketsPeak,
              socketsWho.c_str(), row["worker_max_rss_mib"].get<double>(), failed ? "  FAILED" : "");
  if (failed) std::printf("  %d ranks failed; the first: %s\n", failed, firstError.c_str());
  for (const auto& [message, count] : errors)
    if (message.find("the parent leader") == std::string::npos && message.find("this host's leader") == std::string::npos)
      std::printf("  %6d ranks: %s\n", count, message.c_str());
  // The cost model's prediction for this run: the load exactly as counted, this machine's time as
  // every party's CPU over its cores.
  loom::model::BootstrapConstants constants;
  if (loom::Status parsed = loom::model::parseBootstrapConstants(o.modelConstants, &constants); !parsed.ok())
    throw std::runtime_error(parsed.message());
  loom::model::BootstrapJob job;
  job.ranks = nranks;
  job.ranksPerHost = o.ranksPerHost;
  job.gatherBytes = o.gatherBytes;
  job.ranksPerProcess = perProcess;
  const loom::model::BootstrapPrediction model = loom::model::predictBootstrap(job, constants);
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const double modelS = model.totalCpuUs / cores / 1e6;
  row["model_busiest_bytes"] = model.busiestBytes.bytes;
  row["model_busiest_sockets"] = model.busiestSockets.sockets;
  row["model_cpu_s"] = model.totalCpuUs / 1e6;
  row["model_one_machine_s"] = modelS;
  row["cores"] = cores;
  std::printf("  model: busiest %.0f B (%s), sockets %d (%s); CPU %.3f s (measured %.3f s), %.3f s on %d cores\n",
              model.busiestBytes.bytes, model.busiestBytes.party.c_str(), model.busiestSockets.sockets,
              model.busiestSockets.party.c_str(), model.totalCpuUs / 1e6, cpuS, modelS, cores);
  std::printf("  leaders with the table, by depth (s):");
  for (double t : tableByDepth) std::printf(" %.3f", t);
  std::printf("\n");
  std::fflush(stdout);
  bool ok = failed == 0;
  if (o.maxSeconds > 0 && seconds > o.maxSeconds) {
    std::printf("  over the bound: init %.3f s > %.3f s\n", seconds, o.maxSeconds);
    ok = false;
  }
  if (o.maxSockets > 0 && socketsPeak > o.maxSockets) {
    std::printf("  over the bound: %d sockets > %d\n", socketsPeak, o.maxSockets);
    ok = false;
  }
  if (o.maxBytes > 0 && busiestBytes > o.maxBytes) {
    std::printf("  over the bound: %.0f bytes > %.0f\n", busiestBytes, o.maxBytes);
    ok = false;
  }
  auto offBy = [](double measured, double predicted) { return predicted > 0 ? std::abs(measured / predicted - 1) : 1.0; };
  // The bytes follow from the protocol alone; the sockets the model gives are the most a party may hold
  // (the rendezvous holds 64 connections only when that many leaders send at once).
  if (o.modelWithin > 0 && (offBy(busiestBytes, model.busiestBytes.bytes) > o.modelWithin ||
                            socketsPeak > model.busiestSockets.sockets)) {
    std::printf("  off the model: %.0f bytes (model %.0f, within %.0f%%), %d sockets (model: at most %d)\n",
                busiestBytes, model.busiestBytes.bytes, 100 * o.modelWithin, socketsPeak, model.busiestSockets.sockets);
    ok = false;
  }
  *withinBounds = *withinBounds && ok;
  munmap(mem, shared);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Loom's bootstrap at scale: N emulated ranks over simulated hosts in one process"};
  app.add_option("--ranks", o.ranks, "rank counts to run, in order")->delimiter(',');
  app.add_option("--ranks-per-host", o.ranksPerHost, "ranks per simulated host")->check(CLI::PositiveNumber);
  app.add_option("--gather-bytes", o.gatherBytes, "each rank's part of the allGather (0: a barrier only)");
  app.add_option("--ranks-per-process", o.ranksPerProcess, "ranks per worker process (whole hosts)")
      ->check(CLI::PositiveNumber);
  app.add_option("--timeout-ms", o.timeoutMs, "each rank's bootstrap timeout");
  app.add_option("--json", o.json, "append one JSON line per rank count to this file");
  app.add_option("--max-seconds", o.maxSeconds, "fail when an init takes longer");
  app.add_option("--max-sockets", o.maxSockets, "fail when the busiest party holds more sockets at once");
  app.add_option("--max-bytes", o.maxBytes, "fail when the busiest party moves more bytes");
  app.add_option("--model-within", o.modelWithin,
                 "fail when the busiest party's bytes differ from the cost model's by more than this fraction, or "
                 "its sockets exceed the model's bound");
  app.add_option("--model-constants", o.modelConstants, "the cost model's constants, as --constants prints them");
  bool constantsOnly = false;
  app.add_flag("--constants", constantsOnly, "measure the cost model's constants on this machine, print them, exit");
  CLI11_PARSE(app, argc, argv);
  if (constantsOnly) {
    std::printf("%s\n", loom::model::formatBootstrapConstants(loom::bootstrap_scale::measureConstants()).c_str());
    return 0;
  }
  bool withinBounds = true;
  for (int n : o.ranks) {
    if (!enoughPids(n)) {
      withinBounds = false;
      continue;
    }
    nlohmann::json row = runOnce(o, n, &withinBounds);
    if (!o.json.empty()) std::ofstream(o.json, std::ios::app) << row.dump() << "\n";
  }
  return withinBounds ? 0 : 1;
}
