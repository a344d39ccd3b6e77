#include "core/communicator.h"

#include <sched.h>

#include <mutex>

#include "base/clock.h"
#include "base/log.h"
#include "base/settings.h"
#include "bootstrap/unique_id.h"
#include "core/build_info.h"
#include "core/observe/state_ports.h"
#include "core/observe/topology_report.h"
#include "core/job_setup.h"
#include "core/run/net_lanes.h"

std::string loomComm::describe() const {
  return fmt::format("comm '{}' rank {}/{}", settings.name, rank, nranks);
}

void loomComm::shutdown() {  // the order and its reasons: communicator.h
  stateServing.reset();
  engine.reset();
  device.reset();
  tracer.reset();
  if (transports) transports->close();
  transports.reset();
  bootstrap.reset();
}

namespace loom {

Status readCommSettings(const loomConfig_t* config, CommSettings* out) {
  CommSettings s;
  // A bad line of Loom's settings files is the init's error, naming the file and line; so is a bad value
  // of any of these (base/settings.def says what each allows).
  LOOM_TRY(checkSettingsFiles());
  for (Setting checked : {Setting::TimeoutMs, Setting::ChunkBytes, Setting::NChannels, Setting::FifoSlots,
                          Setting::Transport, Setting::RanksPerNode, Setting::NetConnect})
    LOOM_TRY(checkSetting(checked));
  // LOOM_ALGO's rules are text the table cannot check: their parser refuses a bad piece, naming it.
  const std::string algo = settingText(Setting::Algo);
  // A value from a settings file is named by its file and line, as the file's other bad lines are.
  const std::string from = settingSource(Setting::Algo);
  const std::string named = fmt::format("{}={}", specOf(Setting::Algo).name, algo);
  LOOM_TRY(AlgorithmRules::parse(algo, &s.algorithmRules)
               .withContext(from == "environment" || from == "default" ? named : from + ": " + named));
  for (Setting used : {Setting::TimeoutMs, Setting::ChunkBytes, Setting::NChannels, Setting::FifoSlots,
                       Setting::Transport, Setting::Check, Setting::Algo, Setting::RanksPerNode, Setting::Verify,
                       Setting::Net, Setting::SocketIfname, Setting::NetDirect, Setting::NetConnect})
    s.origins.push_back(originOf(used));
  s.timeoutMs = settingInt(Setting::TimeoutMs);
  // Two channels of 128 KiB slots: the shared memory of one channel of 256 KiB slots, and the tuner
  // uses the second channel for large operations only (MachineModel::minChannelBytes).
  s.chunkBytes = static_cast<size_t>(settingInt(Setting::ChunkBytes));
  s.nchannels = static_cast<int>(settingInt(Setting::NChannels));
  s.nslots = static_cast<size_t>(settingInt(Setting::FifoSlots));
  s.forcedTransport = settingChoice(Setting::Transport);
  s.netConnectEager = settingChoice(Setting::NetConnect) == "eager";
  s.checkSignatures = settingFlag(Setting::Check);
  if (settingIsSet(Setting::ChunkBytes)) s.forcedChunkBytes = s.chunkBytes;
  if (settingIsSet(Setting::NChannels)) s.forcedChannels = s.nchannels;
  s.ranksPerNode = static_cast<int>(settingInt(Setting::RanksPerNode));
  s.verifyPlans = static_cast<int>(settingInt(Setting::Verify));
  if (config) {
    if (config->magic != LOOM_CONFIG_MAGIC || config->size < offsetof(loomConfig_t, timeoutMs))
      return invalidArgument("config was not initialised with LOOM_CONFIG_INITIALIZER");
    if (config->blocking != LOOM_CONFIG_UNDEF_INT) s.blocking = config->blocking != 0;
    if (config->commName) s.name = config->commName;
    if (config->size >= offsetof(loomConfig_t, splitShare) && config->timeoutMs != LOOM_CONFIG_UNDEF_INT) {
      if (config->timeoutMs < 0) return invalidArgument("config timeoutMs {} is negative", config->timeoutMs);
      s.timeoutMs = config->timeoutMs;
      s.origins[0] = SettingOrigin{Setting::TimeoutMs, std::to_string(config->timeoutMs), "loomConfig_t.timeoutMs"};
    }
  }
  s.chunkBytes = (s.chunkBytes + 63) & ~size_t{63};
  if (s.forcedChunkBytes) s.forcedChunkBytes = s.chunkBytes;
  *out = s;
  return Status::Ok();
}

namespace {

// What the device layer needs of this communicator (device/device_layer.h).
device::CommFacts deviceFacts(loomComm* comm, const std::vector<ProcessIdentity>& peers) {
  device::CommFacts facts;
  facts.rank = comm->rank;
  facts.nranks = comm->nranks;
  facts.describe = comm->describe();
  facts.exchange = comm->bootstrap.get();
  facts.processes = peers;
  facts.timeoutMs = comm->settings.timeoutMs;
  facts.fail = [comm](const Status& error) {
    // A plan kernel's lane that waited past LOOM_TIMEOUT_MS: this rank's own wait timed out (its other
    // failures are a peer's or the device's), so it logs the job's hang report as a host timeout does.
    if (error.code() == loomTimeout) comm->flight.markTimedOut();
    markCommFailed(comm, error, false);
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    comm->lastError = error.message();
  };
  facts.netLanes = netLanesFor(comm);
  return facts;
}

}  // namespace

Status initCommunicator(loomComm* comm, int nranks, const loomUniqueId& id, int rank, const loomConfig_t* config) {
  if (nranks < 1) return invalidArgument("nranks {} must be at least 1", nranks);
  if (rank < 0 || rank >= nranks) return invalidArgument("rank {} is outside 0..{}", rank, nranks - 1);
  UniqueIdData idData;
  LOOM_TRY(decodeUniqueId(id, &idData));
  LOOM_TRY(readCommSettings(config, &comm->settings));
  comm->rank = rank;
  comm->nranks = nranks;
  if (comm->settings.name.empty()) comm->settings.name = "loom";

  // Each phase's time, for the "init took" line (LOOM_DEBUG=INFO), as NCCL's "Init timings".
  uint64_t mark = nowNs();
  auto phaseMs = [&mark] {
    const uint64_t now = nowNs();
    const double ms = static_cast<double>(now - mark) / 1e6;
    mark = now;
    return ms;
  };
  const uint64_t start = mark;
  RankInfo self;
  self.process = thisProcess();
  self.cudaDevice = comm->cudaDevice;
  Socket statePort;
  LOOM_TRY(openStatePort(&statePort, &self.statePort).withContext(comm->describe()));
  LOOM_TRY(Bootstrap::create(idData, rank, nranks, self, static_cast<int>(comm->settings.timeoutMs), &comm->aborted,
                             &comm->bootstrap)
               .withContext(comm->describe() + ": bootstrap"));
  const double bootstrapMs = phaseMs();
  std::vector<ProcessIdentity> peers;
  for (const RankInfo& info : comm->bootstrap->table()) peers.push_back(info.process);
  // The topology first: transports take their NIC and memory placement from it.
  LOOM_TRY(setUpJobTopology(comm).withContext(comm->describe() + ": topology"));
  const double topologyMs = phaseMs();
  TransportOptions options;
  options.nchannels = comm->settings.nchannels;
  options.nslots = comm->settings.nslots;
  options.slotBytes = comm->settings.chunkBytes;
  options.forced = comm->settings.forcedTransport;
  options.placeMemory = [binding = comm->numaBinding](void* p, size_t bytes) { binding.preferMemory(p, bytes); };
  options.netProvider = settingText(Setting::Net);
  options.netDevice = settingText(Setting::SocketIfname);
  if (comm->job->hosts() > 1)
    options.netPreferred = {comm->job->nicNameOf[static_cast<size_t>(rank)], comm->job->nicBusIdOf[static_cast<size_t>(rank)],
                            comm->job->nicPathOf[static_cast<size_t>(rank)]};
  options.cudaDevice = comm->cudaDevice;
  // Asked of the driver only where the network may be used (the GPUDirect RDMA choice at its setup).
  const bool mayUseNet = comm->job->hosts() > 1 || !options.forced.empty();
  if (comm->cudaDevice >= 0 && mayUseNet)
    options.cudaDmabuf = device::dmabufExportable(comm->cudaDevice, &options.cudaDmabufWhy);
  options.netDirect = settingFlag(Setting::NetDirect);
  options.netConnectEager = comm->settings.netConnectEager;
  options.timeoutMs = comm->settings.timeoutMs;
  LOOM_TRY(TransportSet::create(*comm->bootstrap, peers, options, &comm->transports)
               .withContext(comm->describe() + ": transport setup"));
  const double transportsMs = phaseMs();
  // Waiting ranks spin only while they have a core each; otherwise they yield and sleep early so the
  // rank they wait for can run.
  int localRanks = 0;
  for (const ProcessIdentity& p : peers) localRanks += p.sameHost(peers[rank]);
  cpu_set_t cpus;
  int ncpus = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  comm->oversubscribed = localRanks > ncpus;
  comm->spinNs = settingInt(Setting::SpinUs, comm->oversubscribed ? 5 : 2000) * 1000;
  // LOOM_SPIN_US set: the user's spin, kept whatever the waits do.
  comm->waitHistory = std::make_unique<WaitHistory>(settingIsSet(Setting::SpinUs));
  comm->mayMoveThreads = !comm->oversubscribed && !settingFlag(Setting::IgnoreCpuAffinity);
  comm->callerSharing = std::make_unique<CoreSharing>(comm->transports.get(), comm->mayMoveThreads);
  reportJobTopology(comm);
  comm->tracer = Tracer::fromEnvironment(rank, comm->settings.name);
  comm->device = device::makeCommDevice(deviceFacts(comm, peers));
  if (!comm->settings.blocking) comm->engine = std::make_unique<AsyncEngine>(comm, comm->opCount);
  LOOM_INFO(Init, "{}: ready ({} channel(s), {} KiB chunks, {} rank(s) per node)", comm->describe(),
            options.nchannels, options.slotBytes >> 10, comm->tuner->machine().ranksInNode());
  static std::once_flag banner;  // once per process, as NCCL's "NCCL version" line: which library is in use
  std::call_once(banner, [] {
    const BuildInfo& b = buildInfo();
    LOOM_INFO(Init, "Loom version {} ({} build{})", b.version, b.buildType,
              b.cuda ? ", CUDA " + b.cudaCompiler : ", no CUDA");
  });
  logUnreadNcclVariables();
  comm->stateServing = serveState(comm, std::move(statePort), idData.secret);
  for (const SettingOrigin& o : comm->settings.origins)
    if (o.source != "default") LOOM_INFO(Init, "{}: {}={} (from {})", comm->describe(), specOf(o.id).name, o.value, o.source);
  const double restMs = phaseMs();
  LOOM_INFO(Init, "{}: init took {:.2f} ms (bootstrap {:.2f}, topology {:.2f}, transports {:.2f}, rest {:.2f})",
            comm->describe(), static_cast<double>(mark - start) / 1e6, bootstrapMs, topologyMs, transportsMs, restMs);
  return Status::Ok();
}

Status checkCommUsable(loomComm* comm) {
  if (comm->aborted.load()) return errorStatus(loomInvalidUsage, "{} was aborted", comm->describe());
  if (comm->finalized) return errorStatus(loomInvalidUsage, "{} was finalized", comm->describe());
  if (comm->asyncError.load() != loomSuccess) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    return errorStatus(loomInvalidUsage, "{} is unusable after an earlier error: {}", comm->describe(), comm->fatalError);
  }
  return Status::Ok();
}

void markCommFailed(loomComm* comm, const Status& error, bool ownsConnections) {
  comm->flight.failed(error.message());
  {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    if (comm->fatalError.empty()) comm->fatalError = error.message();
  }
  int expected = loomSuccess;
  comm->asyncError.compare_exchange_strong(expected, error.code());
  if (comm->transports) comm->transports->markFailed(error.message(), ownsConnections);
  if (comm->device) comm->device->raiseAbort();  // plan kernels' lanes waiting on peers stop at once
  // Who is stuck, while every rank's state still says so: by the ranks whose own wait timed out (those
  // that failed on a peer's notice leave it to them), after the notices went out.
  if (comm->flight.timedOut() && comm->stateServing) comm->stateServing->reportAfterTimeout();
}

}  // namespace loom
