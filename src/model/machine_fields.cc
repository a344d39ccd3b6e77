#include "model/machine_fields.h"

#include <cmath>
#include <functional>

#include "model/named_values.h"

namespace loom::model {
namespace {

struct Field {
  const char* name;
  bool zeroAllowed;  // latencies and costs may be 0; rates and counts may not
  std::function<void(MachineModel*, double)> set;
};

const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      {"intra_gbs", false, [](MachineModel* m, double v) { m->intraGbs = v; }},
      {"latency_us", true, [](MachineModel* m, double v) { m->intraLatencyUs = v; }},
      {"net_latency_us", true, [](MachineModel* m, double v) { m->netLatencyUs = v; }},
      {"nics_per_node", false, [](MachineModel* m, double v) { m->nicsPerNode = static_cast<int>(v); }},
      {"nic_gbs", false, [](MachineModel* m, double v) { m->nicGbs = v; }},
      {"step_us", true, [](MachineModel* m, double v) { m->stepUs = v; }},
      {"launch_us", true, [](MachineModel* m, double v) { m->launchUs = v; }},
      {"copy_gbs", true, [](MachineModel* m, double v) { m->copyGbs = v; }},
      {"fifo_slots", false, [](MachineModel* m, double v) { m->fifoSlots = static_cast<int>(v); }},
      // 1: the ranks address each other's buffers (rank threads on one GPU): peer-memory plans are candidates.
      {"peer_memory", true, [](MachineModel* m, double v) { m->peerMemory = v != 0; }},
  };
  return table;
}

const Field* find(const std::string& name) {
  for (const Field& f : fields())
    if (name == f.name) return &f;
  return nullptr;
}

// The names, for messages: "intra_gbs, latency_us, ...".
std::string machineFieldNames() {
  std::string names;
  for (const Field& f : fields()) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

}  // namespace

Status checkMachineFields(const MachineFields& given) {
  for (const auto& [name, value] : given) {
    const Field* f = find(name);
    if (f == nullptr) return invalidArgument("unknown machine field '{}' (known: {})", name, machineFieldNames());
    if (!std::isfinite(value) || value < 0 || (!f->zeroAllowed && value == 0))
      return invalidArgument("machine field {} = {} must be {}", name, value, f->zeroAllowed ? "at least 0" : "positive");
  }
  return Status::Ok();
}

Status parseMachineFields(const std::string& text, MachineFields* out) {
  out->clear();
  for (const NamedValue& entry : splitNamedValues(text)) {
    if (!entry.hasValue) return invalidArgument("machine field '{}' is not name=value", entry.name);
    double v = 0;
    if (!parseNumber(entry.value, &v))
      return invalidArgument("machine field '{}': '{}' is not a number", entry.name, entry.value);
    (*out)[entry.name] = v;
  }
  return checkMachineFields(*out);
}

void applyMachineFields(const MachineFields& given, MachineModel* machine) {
  for (const auto& [name, value] : given) find(name)->set(machine, value);
  auto latency = given.find("latency_us");
  if (latency != given.end() && !given.count("net_latency_us")) machine->netLatencyUs = latency->second;
}

}  // namespace loom::model
