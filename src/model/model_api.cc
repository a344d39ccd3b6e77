// include/loom_model.h over JobModel: argument checks, the C structs, errors as loomGetLastError(NULL)
// text on the calling thread.
#include "loom_model.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "core/api/api_result.h"
#include "model/bootstrap_model.h"
#include "model/job_model.h"

struct loomModel {
  std::unique_ptr<loom::model::JobModel> model;
};

namespace {

using loom::Status;
using loom::invalidArgument;

Status toCollective(loomModelCollective_t c, loom::Collective* out) {
  switch (c) {
    case loomModelAllReduce: *out = loom::Collective::AllReduce; return Status::Ok();
    case loomModelAllGather: *out = loom::Collective::AllGather; return Status::Ok();
    case loomModelReduceScatter: *out = loom::Collective::ReduceScatter; return Status::Ok();
    case loomModelBroadcast: *out = loom::Collective::Broadcast; return Status::Ok();
    case loomModelReduce: *out = loom::Collective::Reduce; return Status::Ok();
    case loomModelAlltoAll: *out = loom::Collective::AlltoAll; return Status::Ok();
    case loomModelGather: *out = loom::Collective::Gather; return Status::Ok();
    case loomModelScatter: *out = loom::Collective::Scatter; return Status::Ok();
  }
  return invalidArgument("loomModel: unknown collective {}", static_cast<int>(c));
}

Status ranksOf(const int* ranks, int nranks, std::vector<int>* out) {
  out->clear();
  if (ranks == nullptr) return Status::Ok();
  if (nranks < 1) return invalidArgument("loomModel: a group of {} ranks", nranks);
  out->assign(ranks, ranks + nranks);
  return Status::Ok();
}

void copyText(const std::string& text, char* out, size_t size) {
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

template <typename Body>
loomResult_t modelCall(Body&& body) {
  return loom::apiCall(nullptr, std::forward<Body>(body));
}

}  // namespace

extern "C" {

loomResult_t loomModelCreate(const loomModelConfig_t* config, loomModel_t* model) {
  return modelCall([&]() -> Status {
    if (config == nullptr || model == nullptr) return invalidArgument("loomModelCreate: NULL config or model");
    *model = nullptr;
    if (config->size != sizeof(loomModelConfig_t))
      return invalidArgument("loomModelCreate: config.size {} is not {} (start from LOOM_MODEL_CONFIG_INITIALIZER)",
                             config->size, sizeof(loomModelConfig_t));
    loom::model::JobModelOptions o;
    o.world = config->world;
    o.ranksPerNode = config->ranksPerNode;
    o.topology = config->topology ? config->topology : "";
    switch (config->memory) {
      case loomModelMemoryAuto: o.memory = loom::model::MemoryChoice::Auto; break;
      case loomModelMemoryHost: o.memory = loom::model::MemoryChoice::Host; break;
      case loomModelMemoryDevice: o.memory = loom::model::MemoryChoice::Device; break;
      default: return invalidArgument("loomModelCreate: unknown memory {}", static_cast<int>(config->memory));
    }
    if (!(config->nvswitchGbs >= 0)) return invalidArgument("loomModelCreate: nvswitchGbs must not be negative");
    o.nvswitchGbs = config->nvswitchGbs;
    if (config->machine) LOOM_TRY(loom::model::parseMachineFields(config->machine, &o.machine).withContext("loomModelCreate"));
    o.maxChannels = config->maxChannels;
    o.slotBytes = config->slotBytes;
    o.calibrationFile = config->calibration ? config->calibration : "";
    auto handle = std::make_unique<loomModel>();
    LOOM_TRY(loom::model::JobModel::create(o, &handle->model));
    *model = handle.release();
    return Status::Ok();
  });
}

loomResult_t loomModelDestroy(loomModel_t model) {
  delete model;
  return loomSuccess;
}

loomResult_t loomModelWorld(loomModel_t model, int* world, int* ranksPerNode) {
  return modelCall([&]() -> Status {
    if (model == nullptr) return invalidArgument("loomModelWorld: NULL model");
    if (world) *world = model->model->world();
    if (ranksPerNode) *ranksPerNode = model->model->ranksPerNode();
    return Status::Ok();
  });
}

const char* loomModelSource(loomModel_t model) { return model ? model->model->source().c_str() : ""; }

loomResult_t loomModelPredict(loomModel_t model, const loomModelRequest_t* request, loomModelPrediction_t* prediction) {
  return modelCall([&]() -> Status {
    if (model == nullptr || request == nullptr || prediction == nullptr)
      return invalidArgument("loomModelPredict: NULL model, request or prediction");
    loom::model::CollectiveQuery q;
    LOOM_TRY(toCollective(request->collective, &q.coll));
    q.bytes = request->bytes;
    if (request->elemBytes < 1) return invalidArgument("loomModelPredict: elemBytes {} must be at least 1", request->elemBytes);
    q.elemBytes = static_cast<size_t>(request->elemBytes);
    LOOM_TRY(ranksOf(request->ranks, request->nranks, &q.ranks));
    q.concurrent = request->concurrent != 0;
    q.root = request->root;
    if (request->algorithm)
      LOOM_TRY(loom::AlgorithmRules::parse(request->algorithm, &q.algorithms)
                   .withContext(fmt::format("loomModelPredict: algorithm '{}'", request->algorithm)));
    if (request->channels < 0) return invalidArgument("loomModelPredict: channels {} must not be negative", request->channels);
    q.channels = request->channels;
    q.chunkBytes = request->chunkBytes;
    loom::model::Prediction p;
    LOOM_TRY(model->model->predict(q, &p));
    *prediction = loomModelPrediction_t{};
    prediction->timeUs = p.timeUs;
    copyText(p.algorithm, prediction->algorithm, sizeof(prediction->algorithm));
    prediction->channels = p.channels;
    prediction->chunkBytes = p.chunkBytes;
    prediction->count = p.count;
    prediction->bytes = p.bytes;
    prediction->algbwGbs = p.algbwGbs;
    prediction->busbwGbs = p.busbwGbs;
    copyText(p.note, prediction->note, sizeof(prediction->note));
    return Status::Ok();
  });
}

loomResult_t loomModelPointToPoint(loomModel_t model, size_t bytes, const int* srcs, const int* dsts, int npairs,
                                   int elemBytes, int concurrent, double* timeUs) {
  return modelCall([&]() -> Status {
    if (model == nullptr || timeUs == nullptr) return invalidArgument("loomModelPointToPoint: NULL model or timeUs");
    if (npairs < 0 || (npairs > 0 && (srcs == nullptr || dsts == nullptr)))
      return invalidArgument("loomModelPointToPoint: {} pairs without their ranks", npairs);
    if (elemBytes < 1) return invalidArgument("loomModelPointToPoint: elemBytes {} must be at least 1", elemBytes);
    std::vector<std::pair<int, int>> pairs;
    for (int i = 0; i < npairs; ++i) pairs.emplace_back(srcs[i], dsts[i]);
    return model->model->pointToPoint(bytes, pairs, static_cast<size_t>(elemBytes), concurrent != 0, timeUs);
  });
}

loomResult_t loomModelGetMachine(loomModel_t model, const int* ranks, int nranks, int concurrent,
                                 loomModelMachine_t* machine) {
  return modelCall([&]() -> Status {
    if (model == nullptr || machine == nullptr) return invalidArgument("loomModelGetMachine: NULL model or machine");
    std::vector<int> group;
    LOOM_TRY(ranksOf(ranks, nranks, &group));
    loom::MachineModel m;
    LOOM_TRY(model->model->machineOf(group, concurrent != 0, &m));
    *machine = loomModelMachine_t{};
    machine->nranks = m.nranks;
    machine->ranksPerNode = m.ranksInNode();
    machine->intraGbs = m.intraGbs;
    machine->latencyUs = m.intraLatencyUs;
    machine->nicsPerNode = m.nicsPerNode;
    machine->nicGbs = m.nicGbs;
    machine->netLatencyUs = m.netLatencyUs;
    machine->stepUs = m.stepUs;
    machine->launchUs = m.launchUs;
    machine->copyGbs = m.copyGbs;
    machine->fifoSlots = m.fifoSlots;
    machine->maxChannels = model->model->maxChannels();
    machine->device = model->model->device() ? 1 : 0;
    machine->slotBytes = model->model->slotBytes();
    return Status::Ok();
  });
}

loomResult_t loomModelPredictInit(const loomModelInitRequest_t* request, loomModelInitPrediction_t* prediction) {
  return modelCall([&]() -> Status {
    if (request == nullptr || prediction == nullptr) return invalidArgument("loomModelPredictInit: NULL request or prediction");
    if (request->ranks < 1) return invalidArgument("loomModelPredictInit: {} ranks", request->ranks);
    if (request->ranksPerNode < 1) return invalidArgument("loomModelPredictInit: {} ranks per node", request->ranksPerNode);
    if (!(request->netLatencyUs >= 0) || !(request->netGbs > 0))
      return invalidArgument("loomModelPredictInit: network latency {} us and rate {} GB/s (need >= 0 and > 0)",
                             request->netLatencyUs, request->netGbs);
    loom::model::BootstrapConstants constants;
    if (request->constants)
      LOOM_TRY(loom::model::parseBootstrapConstants(request->constants, &constants).withContext("loomModelPredictInit"));
    loom::model::BootstrapJob job;
    job.ranks = request->ranks;
    job.ranksPerHost = request->ranksPerNode;
    job.netLatencyUs = request->netLatencyUs;
    job.netGbs = request->netGbs;
    job.gatherBytes = request->gatherBytes;
    job.ranksPerProcess = std::max(1, request->ranksPerProcess);
    const loom::model::BootstrapPrediction p = loom::model::predictBootstrap(job, constants);
    loomModelInitPrediction_t out{};
    out.hosts = p.hosts;
    out.depth = p.depth;
    out.tableBytes = p.tableBytes;
    out.tableUs = p.tableUs;
    out.gatherUs = p.gatherUs;
    out.barrierUs = p.barrierUs;
    out.totalUs = p.clusterUs;
    out.busiestBytes = p.busiestBytes.bytes;
    copyText(p.busiestBytes.party, out.busiestBytesParty, sizeof out.busiestBytesParty);
    out.busiestSockets = p.busiestSockets.sockets;
    copyText(p.busiestSockets.party, out.busiestSocketsParty, sizeof out.busiestSocketsParty);
    out.cpuUs = p.totalCpuUs;
    *prediction = out;
    return Status::Ok();
  });
}

}  // extern "C"
