#include "core/observe/hang_report.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace loom {
namespace {

struct Entry {
  std::string op, dtype;
  uint64_t count = 0;
  int peer = -1;
  int64_t ageUs = 0;
  std::string signature() const {
    const std::string whom = peer < 0 ? "" : op == "SendRecv" ? fmt::format(" with rank {}", peer) : fmt::format(" (root {})", peer);
    return fmt::format("{} of {} x {}{}", op, count, dtype, whom);
  }
};

struct RankState {
  bool reached = false;
  uint64_t lastIssued = 0, completedUpTo = 0;
  int waitingOn = -1;  // the peer a lasting wait is on
  std::string failure, name;
  std::map<uint64_t, Entry> entries;
};

Status parseState(int rank, const std::string& text, RankState* out) {
  if (text.empty()) return Status::Ok();
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    out->reached = true;
    out->lastIssued = j.at("last_issued").get<uint64_t>();
    out->completedUpTo = j.at("completed_up_to").get<uint64_t>();
    out->failure = j.value("failure", "");
    out->waitingOn = j.value("waiting_on", -1);
    out->name = j.value("comm", "");
    for (const auto& e : j.at("entries"))
      out->entries[e.at("seq").get<uint64_t>()] =
          Entry{e.at("op").get<std::string>(), e.at("dtype").get<std::string>(), e.at("count").get<uint64_t>(),
                e.at("peer").get<int>(), e.value("age_us", int64_t{0})};
  } catch (const std::exception& e) {
    return invalidArgument("rank {}'s state is not loomCommDumpState's JSON: {}", rank, e.what());
  }
  return Status::Ok();
}

std::string rankList(const std::vector<int>& ranks) { return ranks.empty() ? "none" : fmt::format("{}", fmt::join(ranks, ", ")); }

}  // namespace

Status analyzeHang(const std::vector<std::string>& states, std::string* text, std::string* json) {
  const int n = static_cast<int>(states.size());
  std::vector<RankState> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) LOOM_TRY(parseState(r, states[static_cast<size_t>(r)], &ranks[static_cast<size_t>(r)]));
  std::vector<int> unreachable, reached;
  for (int r = 0; r < n; ++r) (ranks[static_cast<size_t>(r)].reached ? reached : unreachable).push_back(r);
  nlohmann::ordered_json j;
  j["ranks"] = n;
  j["unreachable"] = unreachable;
  std::string out = fmt::format("Loom hang report{}: {} rank(s), {} reached\n",
                                reached.empty() ? "" : " for comm '" + ranks[static_cast<size_t>(reached[0])].name + "'",
                                n, reached.size());
  // The oldest operation some reached rank has not finished; every reached rank finished all before it.
  std::optional<uint64_t> oldest;
  uint64_t newest = 0;
  for (int r : reached) newest = std::max(newest, ranks[static_cast<size_t>(r)].lastIssued);
  for (int r : reached) {
    const RankState& s = ranks[static_cast<size_t>(r)];
    if (s.completedUpTo < newest) oldest = std::min(oldest.value_or(UINT64_MAX), s.completedUpTo + 1);
  }
  if (!oldest) {
    out += newest == 0 ? "no operation was issued\n"
                       : fmt::format("every reached rank finished all {} operation(s): nothing is pending\n", newest);
    j["oldest_unfinished"] = nullptr;
  } else {
    const uint64_t seq = *oldest;
    std::vector<int> entered, neverEntered, waiting, finished;
    std::map<std::string, std::vector<int>> bySignature;
    for (int r : reached) {
      const RankState& s = ranks[static_cast<size_t>(r)];
      if (s.lastIssued < seq) {
        neverEntered.push_back(r);
        continue;
      }
      entered.push_back(r);
      (s.completedUpTo >= seq ? finished : waiting).push_back(r);
      if (auto e = s.entries.find(seq); e != s.entries.end()) bySignature[e->second.signature()].push_back(r);
    }
    // The signature most ranks called is the expected one; the others are mismatches.
    std::string expected;
    size_t most = 0;
    for (const auto& [sig, rs] : bySignature)
      if (rs.size() > most) expected = sig, most = rs.size();
    nlohmann::ordered_json mismatched = nlohmann::json::array();
    out += fmt::format("oldest operation not finished everywhere: #{} {}\n", seq, expected.empty() ? "(not recorded)" : expected);
    // Whom each waiting rank waits on, where its wait lasted long enough to be noted.
    std::string waitingText;
    nlohmann::ordered_json waitingOn = nlohmann::json::object();
    for (int r : waiting) {
      const int peer = ranks[static_cast<size_t>(r)].waitingOn;
      waitingText += fmt::format("{}{}", waitingText.empty() ? "" : ", ", r);
      if (peer >= 0) {
        waitingText += fmt::format(" (on rank {})", peer);
        waitingOn[std::to_string(r)] = peer;
      }
    }
    out += fmt::format("  entered by: {}\n  waiting in it: {}\n", rankList(entered), waiting.empty() ? "none" : waitingText);
    if (!finished.empty()) out += fmt::format("  finished it: {}\n", rankList(finished));
    for (int r : neverEntered) {
      const RankState& s = ranks[static_cast<size_t>(r)];
      std::string last = "nothing";
      if (auto e = s.entries.find(s.lastIssued); e != s.entries.end())
        last = fmt::format("#{} {}, issued {:.1f} s ago", s.lastIssued, e->second.signature(), e->second.ageUs / 1e6);
      out += fmt::format("  NEVER ENTERED: rank {} (its last operation: {}; {}): the ranks waiting in #{} wait for it\n", r,
                         last, s.completedUpTo >= s.lastIssued ? "finished" : "not finished", seq);
    }
    for (const auto& [sig, rs] : bySignature) {
      if (sig == expected) continue;
      for (int r : rs) {
        out += fmt::format("  MISMATCH: rank {} called {} at #{} where the others called {}\n", r, sig, seq, expected);
        mismatched.push_back({{"rank", r}, {"op", sig}});
      }
    }
    j["oldest_unfinished"] = {{"seq", seq},        {"op", expected},     {"entered", entered},
                              {"never_entered", neverEntered}, {"waiting", waiting}, {"waiting_on", waitingOn},
                              {"mismatched", mismatched}};
  }
  nlohmann::ordered_json failures = nlohmann::json::array();
  for (int r : reached)
    if (const std::string& f = ranks[static_cast<size_t>(r)].failure; !f.empty()) {
      out += fmt::format("rank {} failed: {}\n", r, f);
      failures.push_back({{"rank", r}, {"error", f}});
    }
  j["failures"] = failures;
  if (!unreachable.empty()) out += fmt::format("UNREACHABLE: {}\n", rankList(unreachable));
  *text = out;
  *json = j.dump();
  return Status::Ok();
}

}  // namespace loom
