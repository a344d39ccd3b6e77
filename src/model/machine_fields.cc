#include "model/machine_fields.h"

#include <cmath>
#include <cstdlib>
#include <functional>

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
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find_first_of(", ", at);
    const std::string entry = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) return invalidArgument("machine field '{}' is not name=value", entry);
    const std::string value = entry.substr(eq + 1);
    char* rest = nullptr;
    const double v = std::strtod(value.c_str(), &rest);
    if (value.empty() || rest == nullptr || *rest != '\0')
      return invalidArgument("machine field '{}': '{}' is not a number", entry.substr(0, eq), value);
    (*out)[entry.substr(0, eq)] = v;
  }
  return checkMachineFields(*out);
}

void applyMachineFields(const MachineFields& given, MachineModel* machine) {
  for (const auto& [name, value] : given) find(name)->set(machine, value);
  auto latency = given.find("latency_us");
  if (latency != given.end() && !given.count("net_latency_us")) machine->netLatencyUs = latency->second;
}

}  // namespace loom::model
