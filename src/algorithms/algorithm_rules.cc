#include "algorithms/algorithm_rules.h"

#include <strings.h>

#include <cctype>

#include <fmt/format.h>

#include "algorithms/collective_words.h"
#include "algorithms/registry.h"

namespace loom {
namespace {

constexpr uint64_t kOpenEnded = std::numeric_limits<uint64_t>::max();

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> splitOn(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = text.find(sep);
    parts.push_back(trimmed(text.substr(0, at)));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

std::string collectiveWords() {
  std::string words;
  for (Collective c : kWordedCollectives) words += (words.empty() ? "" : ", ") + std::string(collectiveWord(c));
  return words;
}

// Decimal bytes with an optional K, M or G (binary units, any case).
bool parseBytes(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  uint64_t v = 0;
  size_t i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (v > (kOpenEnded - digit) / 10) return false;
    v = v * 10 + digit;
  }
  if (i == 0) return false;
  int shift = 0;
  if (i + 1 == text.size()) {
    switch (std::tolower(static_cast<unsigned char>(text[i]))) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      default: return false;
    }
  } else if (i != text.size()) {
    return false;
  }
  if (shift && v > (kOpenEnded >> shift)) return false;
  *out = v << shift;
  return true;
}

// "lo-hi", "lo-", "lo-inf".
Status parseRange(std::string_view text, AlgorithmRule* rule) {
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) return invalidArgument("range '{}' has no '-' (lo-hi, or lo- for no upper end)", text);
  const std::string_view lo = trimmed(text.substr(0, dash)), hi = trimmed(text.substr(dash + 1));
  if (!parseBytes(lo, &rule->lo))
    return invalidArgument("size '{}' in range '{}' is not a number of bytes (K, M, G allowed)", lo, text);
  const bool infinite = hi.size() == 3 && strncasecmp(hi.data(), "inf", 3) == 0;
  if (hi.empty() || infinite) {
    rule->hi = kOpenEnded;
  } else if (!parseBytes(hi, &rule->hi)) {
    return invalidArgument("size '{}' in range '{}' is not a number of bytes (K, M, G allowed; empty or inf: no "
                           "upper end)",
                           hi, text);
  }
  if (rule->lo >= rule->hi) return invalidArgument("range '{}' is empty (it is [lo, hi): lo must be below hi)", text);
  return Status::Ok();
}

Status parseAlgorithm(std::string_view word, AlgorithmRule* rule) {
  const AlgorithmEntry* entry = findAlgorithm(word);
  if (!entry) return invalidArgument("unknown algorithm '{}' (one of {})", word, algorithmNames());
  rule->algorithm = entry->id;
  return Status::Ok();
}

// One rule; `previous` is the collective of the rule before it (unset: every collective).
Status parseRule(std::string_view text, std::optional<Collective> previous, AlgorithmRule* rule) {
  if (text.empty()) return invalidArgument("an empty rule (rules are separated by single commas)");
  const std::vector<std::string_view> fields = splitOn(text, ':');
  if (fields.size() > 3)
    return invalidArgument("rule '{}' has {} fields; a rule is [collective:][lo-hi:]algorithm", text, fields.size());
  rule->coll = previous;
  size_t next = 0;
  if (fields.size() >= 2) {
    Collective coll = Collective::AllReduce;
    if (parseCollectiveWord(fields[0], &coll)) {
      rule->coll = coll;
      ++next;
    } else if (fields.size() == 3 || fields[0].find('-') == std::string_view::npos) {
      return invalidArgument("rule '{}': '{}' is not a collective ({})", text, fields[0], collectiveWords());
    }
  }
  if (fields.size() - next == 2) {
    LOOM_TRY(parseRange(fields[next], rule).withContext(fmt::format("rule '{}'", text)));
    ++next;
  }
  return parseAlgorithm(fields[next], rule).withContext(fmt::format("rule '{}'", text));
}

std::string bytesText(uint64_t bytes) {
  for (const auto& [shift, suffix] : {std::pair{30, "G"}, std::pair{20, "M"}, std::pair{10, "K"}})
    if (bytes != 0 && bytes % (uint64_t{1} << shift) == 0) return fmt::format("{}{}", bytes >> shift, suffix);
  return std::to_string(bytes);
}

}  // namespace

Status AlgorithmRules::parse(std::string_view text, AlgorithmRules* out) {
  AlgorithmRules rules;
  text = trimmed(text);
  if (!text.empty()) {
    std::optional<Collective> previous;
    for (std::string_view piece : splitOn(text, ',')) {
      AlgorithmRule rule;
      LOOM_TRY(parseRule(piece, previous, &rule));
      previous = rule.coll;
      rules.rules_.push_back(rule);
    }
  }
  *out = std::move(rules);
  return Status::Ok();
}

std::optional<Algorithm> AlgorithmRules::forCall(Collective coll, uint64_t bytes) const {
  for (auto it = rules_.rbegin(); it != rules_.rend(); ++it)
    if (it->covers(coll, bytes)) return it->algorithm;
  return std::nullopt;
}

std::string AlgorithmRules::text() const {
  std::string out;
  for (const AlgorithmRule& r : rules_) {
    if (!out.empty()) out += ',';
    if (r.coll) out += fmt::format("{}:", collectiveWord(*r.coll));
    if (r.lo != 0 || r.hi != kOpenEnded)
      out += fmt::format("{}-{}:", bytesText(r.lo), r.hi == kOpenEnded ? "" : bytesText(r.hi));
    out += algorithmName(r.algorithm);
  }
  return out;
}

}  // namespace loom
