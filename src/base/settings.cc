#include "base/settings.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>

#include "base/log.h"

namespace loom {
namespace {

constexpr SettingSpec kSettings[] = {
#define LOOM_SETTING(id, name, kind, deflt, allowed, onInvalid, subsystem, meaning, nccl) \
  {Setting::id, name, SettingKind::kind, deflt, allowed, OnInvalid::onInvalid, subsystem, meaning, nccl},
#include "base/settings.def"
#undef LOOM_SETTING
};

constexpr const char* kComputed = "(computed)";

const char* rawValue(const SettingSpec& spec) {
  const char* v = std::getenv(spec.name);  // the one place a LOOM_* variable is read
  return v && *v ? v : nullptr;
}

// Decimal or 0x.., with an optional K/M/G suffix (binary units).
bool parseInteger(const char* text, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 0);
  if (errno != 0 || end == text) return false;
  int shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: break;
  }
  if (*end != '\0') return false;
  if (shift && (v > (std::numeric_limits<long long>::max() >> shift) || v < (std::numeric_limits<long long>::min() >> shift)))
    return false;
  *out = static_cast<int64_t>(v) * (int64_t{1} << shift);
  return true;
}

// "lo..hi" or "lo.." (no upper bound).
void rangeOf(const SettingSpec& spec, int64_t* lo, int64_t* hi) {
  *lo = std::numeric_limits<int64_t>::min();
  *hi = std::numeric_limits<int64_t>::max();
  const char* dots = std::strstr(spec.allowed, "..");
  if (!dots) return;
  const std::string low(spec.allowed, dots);
  if (!low.empty()) parseInteger(low.c_str(), lo);
  if (dots[2] != '\0') parseInteger(dots + 2, hi);
}

// The allowed word `text` matches, as the table spells it, or an empty view.
std::string_view choiceOf(const SettingSpec& spec, std::string_view text) {
  const char* at = spec.allowed;
  while (*at) {
    const char* bar = std::strchr(at, '|');
    const size_t len = bar ? static_cast<size_t>(bar - at) : std::strlen(at);
    if (len == text.size() && strncasecmp(at, text.data(), len) == 0) return {at, len};
    if (!bar) break;
    at = bar + 1;
  }
  return {};
}

// Why `text` is not a valid value of the setting ("" when it is).
std::string problemWith(const SettingSpec& spec, const char* text) {
  switch (spec.kind) {
    case SettingKind::Text: return "";
    case SettingKind::Integer:
    case SettingKind::Flag: {
      int64_t v = 0, lo = 0, hi = 0;
      if (!parseInteger(text, &v)) return "not a number";
      if (spec.kind == SettingKind::Flag) lo = 0, hi = 1;
      else rangeOf(spec, &lo, &hi);
      return v < lo || v > hi ? "out of range" : "";
    }
    case SettingKind::Choice: return choiceOf(spec, text).empty() ? "not one of the allowed values" : "";
  }
  return "";
}

std::string allowedText(const SettingSpec& spec) {
  if (spec.kind == SettingKind::Choice) {
    std::string words = spec.allowed;
    for (char& c : words)
      if (c == '|') c = ',';
    return "one of " + words;
  }
  return spec.allowed;
}

// The value to use: the environment's when valid, else nullptr (after a warning for a bad one, once
// per setting and value: settings are read at every use).
const char* validValue(const SettingSpec& spec) {
  const char* v = rawValue(spec);
  if (!v) return nullptr;
  const std::string problem = problemWith(spec, v);
  if (problem.empty()) return v;
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(std::string(spec.name) + "=" + v).second)
    LOOM_WARN(Init, "ignoring {}={}: {} ({} allows {}); using {}", spec.name, v, problem, spec.name, allowedText(spec),
              *spec.defaultText ? spec.defaultText : "the default");
  return nullptr;
}

}  // namespace

std::span<const SettingSpec> allSettings() { return kSettings; }

const SettingSpec& specOf(Setting s) { return kSettings[static_cast<int>(s)]; }

const SettingSpec* findSetting(std::string_view name) {
  for (const SettingSpec& spec : kSettings) {
    const std::string_view full(spec.name), bare = full.substr(5);  // past "LOOM_"
    for (std::string_view candidate : {full, bare})
      if (candidate.size() == name.size() && strncasecmp(candidate.data(), name.data(), name.size()) == 0) return &spec;
  }
  return nullptr;
}

bool settingIsSet(Setting s) { return rawValue(specOf(s)) != nullptr; }

const char* settingSource(Setting s) { return settingIsSet(s) ? "environment" : "default"; }

Status checkSetting(Setting s) {
  const SettingSpec& spec = specOf(s);
  const char* v = rawValue(spec);
  if (!v) return Status::Ok();
  const std::string problem = problemWith(spec, v);
  if (problem.empty()) return Status::Ok();
  return invalidArgument("{}={} is {}: {} allows {}", spec.name, v, problem, spec.name, allowedText(spec));
}

std::string settingText(Setting s) {
  const SettingSpec& spec = specOf(s);
  if (const char* v = rawValue(spec)) return v;
  return std::strcmp(spec.defaultText, kComputed) == 0 ? "" : spec.defaultText;
}

int64_t settingInt(Setting s, int64_t computed) {
  const SettingSpec& spec = specOf(s);
  int64_t v = computed;
  if (const char* text = validValue(spec)) parseInteger(text, &v);
  else if (std::strcmp(spec.defaultText, kComputed) != 0) parseInteger(spec.defaultText, &v);
  return v;
}

int64_t settingInt(Setting s) { return settingInt(s, 0); }

bool settingFlag(Setting s) { return settingInt(s) != 0; }

std::string settingChoice(Setting s) {
  const SettingSpec& spec = specOf(s);
  if (const char* text = validValue(spec)) return std::string(choiceOf(spec, text));
  return spec.defaultText;
}

std::string settingEffective(Setting s) {
  const SettingSpec& spec = specOf(s);
  if (const char* v = rawValue(spec)) return v;
  return spec.defaultText;
}

SettingOrigin originOf(Setting s) { return SettingOrigin{s, settingEffective(s), settingSource(s)}; }

}  // namespace loom
