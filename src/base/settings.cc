#include "base/settings.h"

#include <strings.h>
#include <unistd.h>  // environ

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/nccl_values.h"

namespace loom {
namespace {

constexpr SettingSpec kSettings[] = {
#define LOOM_SETTING(id, name, kind, deflt, allowed, onInvalid, subsystem, meaning, nccl, ncclUse) \
  {Setting::id, name, SettingKind::kind, deflt, allowed, OnInvalid::onInvalid, subsystem, meaning, nccl, NcclUse::ncclUse},
#include "base/settings.def"
#undef LOOM_SETTING
};

constexpr const char* kComputed = "(computed)";

const char* environmentValue(const char* name) {
  const char* v = std::getenv(name);  // the one place a LOOM_* (or honoured NCCL_*) variable is read
  return v && *v ? v : nullptr;
}

std::string problemWith(const SettingSpec& spec, const char* text);
std::string allowedText(const SettingSpec& spec);

// Warns once per process and text (settings are read at every use).
void warnOnce(const std::string& text) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(text).second) LOOM_WARN(Init, "{}", text);
}

// The environment's value and which variable gave it: the LOOM_ one, else an honoured NCCL one when
// its value is one Loom can use (logUnreadNcclVariables reports one it cannot: logging here could come
// back through the log's own settings).
struct RawValue {
  const char* value = nullptr;
  bool fromNccl = false;
};

// A translated NCCL value, kept for the process (callers keep the pointer; there are few such values).
const char* keptText(std::string text) {
  static std::mutex mutex;
  static std::set<std::string> kept;
  std::lock_guard<std::mutex> lock(mutex);
  return kept.insert(std::move(text)).first->c_str();
}

RawValue rawValueOf(const SettingSpec& spec) {
  if (const char* v = environmentValue(spec.name)) return {v, false};
  if (spec.ncclUse != NcclUse::Honoured && spec.ncclUse != NcclUse::Translated) return {};
  const char* v = environmentValue(spec.nccl);
  if (!v) return {};
  if (spec.ncclUse == NcclUse::Translated) {
    NcclTranslation t = translateNcclValue(spec.id, v);
    if (t.value.empty()) return {};
    v = keptText(std::move(t.value));
  }
  if (!problemWith(spec, v).empty()) return {};
  return {v, true};
}

bool readsNcclVariable(const SettingSpec& spec) {
  return spec.ncclUse == NcclUse::Honoured || spec.ncclUse == NcclUse::Translated;
}

const char* rawValue(const SettingSpec& spec) { return rawValueOf(spec).value; }

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
// per setting and value).
const char* validValue(const SettingSpec& spec) {
  const char* v = rawValue(spec);
  if (!v) return nullptr;
  const std::string problem = problemWith(spec, v);
  if (problem.empty()) return v;
  warnOnce(fmt::format("ignoring {}={}: {} ({} allows {}); using {}", spec.name, v, problem, spec.name,
                       allowedText(spec), *spec.defaultText ? spec.defaultText : "the default"));
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
    // The NCCL variable it reads (what a caller of the drop-in's ncclParamBind names).
    const std::string_view nccl(spec.nccl);
    if (readsNcclVariable(spec) && nccl.size() == name.size() &&
        strncasecmp(nccl.data(), name.data(), name.size()) == 0)
      return &spec;
  }
  return nullptr;
}

bool settingIsSet(Setting s) { return rawValue(specOf(s)) != nullptr; }

const char* settingSource(Setting s) {
  // "environment (NCCL_...)" for each setting, made once: callers keep the pointer.
  static const std::vector<std::string> fromNccl = [] {
    std::vector<std::string> texts;
    for (const SettingSpec& spec : kSettings) texts.push_back(std::string("environment (") + spec.nccl + ")");
    return texts;
  }();
  const RawValue raw = rawValueOf(specOf(s));
  if (!raw.value) return "default";
  return raw.fromNccl ? fromNccl[static_cast<size_t>(s)].c_str() : "environment";
}

Status checkSetting(Setting s) {
  const SettingSpec& spec = specOf(s);
  const char* v = environmentValue(spec.name);
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

int64_t settingDefaultInt(Setting s) {
  int64_t v = 0;
  parseInteger(specOf(s).defaultText, &v);  // the table's defaults are valid (tests/unit/base/settings_test.cc)
  return v;
}

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

void logUnreadNcclVariables() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (char** entry = environ; entry && *entry; ++entry) {
      const std::string_view text(*entry);
      const size_t eq = text.find('=');
      if (text.rfind("NCCL_", 0) != 0 || eq == std::string_view::npos || eq + 1 == text.size()) continue;
      const std::string name(text.substr(0, eq)), value(text.substr(eq + 1));
      const SettingSpec* mirror = nullptr;
      for (const SettingSpec& spec : kSettings)
        if (name == spec.nccl) mirror = &spec;
      if (!mirror) {
        LOOM_INFO(Init, "{}={} is set; Loom does not read it", name, value);
      } else if (mirror->ncclUse == NcclUse::Similar) {
        LOOM_INFO(Init, "{}={} is set; Loom does not read it ({}, the nearest setting, has its own meaning)", name,
                  value, mirror->name);
      } else if (environmentValue(mirror->name)) {
        LOOM_INFO(Init, "{}={} is set; {} is set too and wins", name, value, mirror->name);
      } else if (mirror->ncclUse == NcclUse::Translated) {
        const NcclTranslation t = translateNcclValue(mirror->id, value);
        if (t.value.empty()) LOOM_INFO(Init, "{}={} is set; not read: {}", name, value, t.whyNot);
        else if (t.leftOut.empty()) LOOM_INFO(Init, "{}={} is read as {}={}", name, value, mirror->name, t.value);
        else LOOM_INFO(Init, "{}={} is read as {}={}; not read: {}", name, value, mirror->name, t.value, t.leftOut);
      } else if (const std::string problem = problemWith(*mirror, value.c_str()); !problem.empty()) {
        LOOM_INFO(Init, "{}={} is set; ignored: {} for {} (it allows {})", name, value, problem, mirror->name,
                  allowedText(*mirror));
      }
    }
  });
}

}  // namespace loom
