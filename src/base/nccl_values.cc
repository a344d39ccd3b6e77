#include "base/nccl_values.h"

#include <strings.h>

#include <algorithm>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace loom {
namespace {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = text.find(sep);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

bool sameWord(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// NCCL's list syntax for algorithms and protocols: "A,B" allows those, "^A,B" all but those. Returns the
// allowed names out of `known` (NCCL's spelling), or an empty set and *why for a word not in `known`.
std::set<std::string_view> allowedOf(std::string_view list, const std::vector<std::string_view>& known,
                                     std::string* why) {
  const bool exclude = !list.empty() && list.front() == '^';
  if (exclude) list.remove_prefix(1);
  std::set<std::string_view> named;
  for (std::string_view word : split(list, ',')) {
    auto it = std::find_if(known.begin(), known.end(), [&](std::string_view k) { return sameWord(k, word); });
    if (it == known.end()) {
      *why = fmt::format("NCCL has no name \"{}\" there", word);
      return {};
    }
    named.insert(*it);
  }
  if (!exclude) return named;
  std::set<std::string_view> rest;
  for (std::string_view k : known)
    if (!named.count(k)) rest.insert(k);
  return rest;
}

// NCCL 2.24's per-collective form ("allreduce:ring;broadcast:tree"): sections separated by ';', each a
// list for one collective, or (no ':') for every collective.
bool perCollective(std::string_view text) { return text.find(':') != std::string_view::npos; }

// One NCCL list ("Ring", "^NVLS,Tree", ...) as the one algorithm of Loom's it allows, or "" and *why.
std::string algorithmOfList(std::string_view list, std::string* why) {
  static const std::vector<std::string_view> known = {"Tree", "Ring", "CollnetDirect", "CollnetChain",
                                                      "NVLS", "NVLSTree", "PAT"};
  const std::set<std::string_view> allowed = allowedOf(list, known, why);
  if (!why->empty()) return "";
  const bool ring = allowed.count("Ring"), tree = allowed.count("Tree");
  if (ring && tree) {
    *why = "it allows both ring and tree, which Loom's tuner chooses between by itself (with its direct, one-shot "
           "and hierarchical algorithms)";
    return "";
  }
  if (ring) return "ring";
  if (tree) return "tree";
  *why = "it allows only algorithms Loom does not have (NVLS, CollNet, PAT)";
  return "";
}

// Into LOOM_ALGO's rules (algorithms/algorithm_rules.h): a section for every collective becomes a lone
// algorithm, placed first (Loom's later rules refine earlier ones, as NCCL's per-collective sections
// refine its plain list); "allreduce:ring" stays "allreduce:ring". Sections Loom cannot say the same
// of are left out, and said so.
NcclTranslation algorithm(std::string_view text) {
  // The collectives NCCL's per-collective form names (NCCL's spelling is also LOOM_ALGO's).
  static const std::vector<std::string_view> kCollectives = {"allreduce", "allgather", "reducescatter", "broadcast",
                                                             "reduce"};
  std::vector<std::string> everyCollective, oneCollective, leftOut;
  for (std::string_view section : split(text, ';')) {
    std::string why;
    if (!perCollective(section)) {
      const std::string algo = algorithmOfList(section, &why);
      if (!algo.empty()) everyCollective.push_back(algo);
      else leftOut.push_back(perCollective(text) ? fmt::format("{} ({})", section, why) : why);
      continue;
    }
    const size_t colon = section.find(':');
    const std::string_view coll = section.substr(0, colon), list = section.substr(colon + 1);
    auto it = std::find_if(kCollectives.begin(), kCollectives.end(), [&](std::string_view k) { return sameWord(k, coll); });
    if (it == kCollectives.end()) {
      leftOut.push_back(fmt::format("{} (no collective \"{}\" that Loom knows)", section, coll));
      continue;
    }
    const std::string algo = algorithmOfList(list, &why);
    if (algo.empty()) leftOut.push_back(fmt::format("{} ({})", section, why));
    else oneCollective.push_back(fmt::format("{}:{}", *it, algo));
  }
  everyCollective.insert(everyCollective.end(), oneCollective.begin(), oneCollective.end());
  if (everyCollective.empty()) return {"", fmt::format("{}", fmt::join(leftOut, "; "))};
  return {fmt::format("{}", fmt::join(everyCollective, ",")), "", fmt::format("{}", fmt::join(leftOut, "; "))};
}

// Loom's one low-latency protocol is LL's (8-byte words with their flag), used for device messages up
// to LOOM_DEVICE_LL_BYTES; LL128 has no counterpart. Only "no LL" says something Loom can do.
NcclTranslation protocol(std::string_view text) {
  if (perCollective(text))
    return {"", "a per-collective choice; LOOM_DEVICE_LL_BYTES applies to every collective"};
  static const std::vector<std::string_view> known = {"LL", "LL128", "Simple"};
  std::string why;
  const std::set<std::string_view> allowed = allowedOf(text, known, &why);
  if (!why.empty()) return {"", why};
  if (allowed.empty()) return {"", "it allows no protocol"};
  if (!allowed.count("LL")) return {"0", ""};
  if (allowed.count("Simple"))
    return {"", "it allows LL and Simple, between which Loom chooses by size by itself (LOOM_DEVICE_LL_BYTES)"};
  return {"", "Loom sends only messages up to 4096 B as LL words, never all of them"};
}

NcclTranslation debugLevel(std::string_view text) {
  for (std::string_view same : {"WARN", "INFO", "TRACE"})
    if (sameWord(text, same)) return {std::string(same), ""};
  // VERSION prints NCCL's version line and warnings; ABORT warns and aborts. Loom warns at WARN.
  if (sameWord(text, "VERSION") || sameWord(text, "ABORT")) return {"WARN", ""};
  if (sameWord(text, "NONE")) return {"", "Loom always prints warnings"};
  return {"", "not one of NCCL's levels"};
}

// NCCL's subsystems by Loom's names; those Loom has no counterpart of are dropped.
NcclTranslation debugSubsystems(std::string_view text) {
  struct Map {
    std::string_view nccl, loom;
  };
  static const Map kMap[] = {{"INIT", "init"}, {"ENV", "init"},      {"COLL", "coll"},      {"P2P", "p2p"},
                             {"SHM", "shm"},   {"NET", "net"},       {"GRAPH", "topo,graph"}, {"TUNING", "tune"},
                             {"BOOTSTRAP", "boot"}, {"ALL", "ALL"}};
  const bool exclude = !text.empty() && text.front() == '^';
  if (exclude) text.remove_prefix(1);
  std::vector<std::string_view> mapped, dropped;
  for (std::string_view word : split(text, ',')) {
    auto it = std::find_if(std::begin(kMap), std::end(kMap), [&](const Map& m) { return sameWord(m.nccl, word); });
    if (it == std::end(kMap)) {
      dropped.push_back(word);
    } else if (std::find(mapped.begin(), mapped.end(), it->loom) == mapped.end()) {
      mapped.push_back(it->loom);
    }
  }
  if (mapped.empty())
    return {"", fmt::format("it names no subsystem Loom has ({}; Loom's: {})", fmt::join(dropped, ","),
                            specOf(Setting::DebugSubsys).allowed)};
  return {fmt::format("{}{}", exclude ? "^" : "", fmt::join(mapped, ",")), ""};
}

// NCCL_RUNTIME_CONNECT: 1 (NCCL's default) connects on first use, 0 at init.
NcclTranslation runtimeConnect(std::string_view text) {
  if (text == "1") return {"lazy", ""};
  if (text == "0") return {"eager", ""};
  return {"", fmt::format("'{}' is neither 0 nor 1", text)};
}

}  // namespace

NcclTranslation translateNcclValue(Setting setting, std::string_view ncclText) {
  switch (setting) {
    case Setting::Algo: return algorithm(ncclText);
    case Setting::DeviceLlBytes: return protocol(ncclText);
    case Setting::Debug: return debugLevel(ncclText);
    case Setting::DebugSubsys: return debugSubsystems(ncclText);
    case Setting::NetConnect: return runtimeConnect(ncclText);
    default: return {std::string(ncclText), ""};
  }
}

}  // namespace loom
