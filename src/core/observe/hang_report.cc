#include "core/observe/hang_report.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace loom {
namespace {

std::string signature(const CommStateEntry& e) {
  const std::string whom = e.peer < 0            ? ""
                           : e.op == "SendRecv" ? fmt::format(" with rank {}", e.peer)
                                                : fmt::format(" (root {})", e.peer);
  return fmt::format("{} of {} x {}{}", e.op, e.count, e.dtype, whom);
}

const CommStateEntry* entryAt(const CommState& state, uint64_t seq) {
  for (const CommStateEntry& e : state.entries)
    if (e.seq == seq) return &e;
  return nullptr;
}

std::string rankList(const std::vector<int>& ranks) { return ranks.empty() ? "none" : fmt::format("{}", fmt::join(ranks, ", ")); }

}  // namespace

HangReport analyzeHang(const std::vector<std::optional<CommState>>& states) {
  const int n = static_cast<int>(states.size());
  auto rank = [&](int r) -> const CommState& { return *states[static_cast<size_t>(r)]; };
  std::vector<int> unreachable, reached;
  for (int r = 0; r < n; ++r) (states[static_cast<size_t>(r)] ? reached : unreachable).push_back(r);
  nlohmann::ordered_json j;
  j["ranks"] = n;
  j["unreachable"] = unreachable;
  std::string out = fmt::format("Loom hang report{}: {} rank(s), {} reached\n",
                                reached.empty() ? "" : " for comm '" + rank(reached[0]).comm + "'", n, reached.size());
  // The oldest operation some reached rank has not finished; every reached rank finished all before it.
  std::optional<uint64_t> oldest;
  uint64_t newest = 0;
  for (int r : reached) newest = std::max(newest, rank(r).lastIssued);
  for (int r : reached)
    if (rank(r).completedUpTo < newest) oldest = std::min(oldest.value_or(UINT64_MAX), rank(r).completedUpTo + 1);
  if (!oldest) {
    out += newest == 0 ? "no operation was issued\n"
                       : fmt::format("every reached rank finished all {} operation(s): nothing is pending\n", newest);
    j["oldest_unfinished"] = nullptr;
  } else {
    const uint64_t seq = *oldest;
    std::vector<int> entered, neverEntered, waiting, finished;
    std::map<std::string, std::vector<int>> bySignature;
    for (int r : reached) {
      const CommState& s = rank(r);
      if (s.lastIssued < seq) {
        neverEntered.push_back(r);
        continue;
      }
      entered.push_back(r);
      (s.completedUpTo >= seq ? finished : waiting).push_back(r);
      if (const CommStateEntry* e = entryAt(s, seq)) bySignature[signature(*e)].push_back(r);
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
      const int peer = rank(r).waitingOn;
      waitingText += fmt::format("{}{}", waitingText.empty() ? "" : ", ", r);
      if (peer >= 0) {
        waitingText += fmt::format(" (on rank {})", peer);
        waitingOn[std::to_string(r)] = peer;
      }
    }
    out += fmt::format("  entered by: {}\n  waiting in it: {}\n", rankList(entered), waiting.empty() ? "none" : waitingText);
    if (!finished.empty()) out += fmt::format("  finished it: {}\n", rankList(finished));
    for (int r : neverEntered) {
      const CommState& s = rank(r);
      std::string last = "nothing";
      if (const CommStateEntry* e = entryAt(s, s.lastIssued))
        last = fmt::format("#{} {}, issued {:.1f} s ago", s.lastIssued, signature(*e), e->ageUs / 1e6);
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
    if (const std::string& f = rank(r).failure; !f.empty()) {
      out += fmt::format("rank {} failed: {}\n", r, f);
      failures.push_back({{"rank", r}, {"error", f}});
    }
  j["failures"] = failures;
  if (!unreachable.empty()) out += fmt::format("UNREACHABLE: {}\n", rankList(unreachable));
  return {out, j};
}

Status analyzeHang(const std::vector<std::string>& states, std::string* text, std::string* json) {
  std::vector<std::optional<CommState>> parsed(states.size());
  for (size_t r = 0; r < states.size(); ++r) {
    if (states[r].empty()) continue;
    CommState state;
    LOOM_TRY(parseCommState(states[r], &state).withContext(fmt::format("rank {}'s state", r)));
    parsed[r] = std::move(state);
  }
  HangReport report = analyzeHang(parsed);
  *text = std::move(report.text);
  *json = report.json.dump();
  return Status::Ok();
}

}  // namespace loom
