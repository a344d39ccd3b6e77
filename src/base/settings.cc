#include "base/settings.h"

#include <strings.h>
#include <unistd.h>  // environ

#include <algorithm>
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
#include "base/settings_files.h"

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

// A value and where it came from: the LOOM_ variable, else an honoured NCCL one when its value is one
// Loom can use, else a line of the settings files (logUnreadNcclVariables reports a value it cannot
// use: logging here could come back through the log's own settings). `source` is settingSource's text.
struct RawValue {
  const char* value = nullptr;
  const char* source = nullptr;
};

// A translated NCCL value, kept for the process (callers keep the pointer; there are few such values).
const char* keptText(std::string text) {
  static std::mutex mutex;
  static std::set<std::string> kept;
  std::lock_guard<std::mutex> lock(mutex);
  return kept.insert(std::move(text)).first->c_str();
}

bool readsNcclVariable(const SettingSpec& spec) {
  return spec.ncclUse == NcclUse::Honoured || spec.ncclUse == NcclUse::Translated;
}

// Settings a file cannot give, and why: what reads them does not read the files.
const char* environmentOnlyReason(Setting s) {
  switch (s) {
    case Setting::ConfFile: return "it names the file";
    case Setting::Library: return "the Python package reads it before it loads Loom";
    case Setting::Fixtures: return "tests and examples read it themselves";
    default: return nullptr;
  }
}

// An NCCL variable's value as the setting's, translated where the table says so; null when Loom cannot
// use it.
const char* usableNcclValue(const SettingSpec& spec, const char* text) {
  if (!text || !*text) return nullptr;
  if (spec.ncclUse == NcclUse::Translated) {
    NcclTranslation t = translateNcclValue(spec.id, text);
    if (t.value.empty()) return nullptr;
    text = keptText(std::move(t.value));
  }
  return problemWith(spec, text).empty() ? text : nullptr;
}

// The settings files' value: the first file (in precedence order) with a usable line of the setting's
// name, its last such line. A line Loom's file cannot give is passed over here; checkSettingsFiles makes
// it the init's error. The files stay for the process, so their texts are returned as they are.
RawValue fileValueOf(const SettingSpec& spec) {
  for (const SettingsFile& file : settingsFiles()) {
    const bool loomFile = file.location.kind == SettingsFileKind::Loom;
    if (!loomFile && !readsNcclVariable(spec)) continue;
    const std::string_view wanted = loomFile ? spec.name : spec.nccl;
    for (size_t i = file.conf.entries.size(); i-- > 0;) {
      const ConfEntry& entry = file.conf.entries[i];
      if (entry.name != wanted || entry.value.empty()) continue;
      const char* v = loomFile ? (problemWith(spec, entry.value.c_str()).empty() ? entry.value.c_str() : nullptr)
                               : usableNcclValue(spec, entry.value.c_str());
      if (v) return {v, file.sources[i].c_str()};
    }
  }
  return {};
}

RawValue rawValueOf(const SettingSpec& spec) {
  // "environment (NCCL_...)" for each setting, made once.
  static const std::vector<std::string> fromNccl = [] {
    std::vector<std::string> texts;
    for (const SettingSpec& each : kSettings) texts.push_back(std::string("environment (") + each.nccl + ")");
    return texts;
  }();
  if (const char* v = environmentValue(spec.name)) return {v, "environment"};
  if (readsNcclVariable(spec))
    if (const char* v = usableNcclValue(spec, environmentValue(spec.nccl)))
      return {v, fromNccl[static_cast<size_t>(spec.id)].c_str()};
  // LOOM_CONF_FILE among them: the files are found through it (base/settings_files.cc).
  if (environmentOnlyReason(spec.id)) return {};
  return fileValueOf(spec);
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
  const RawValue raw = rawValueOf(specOf(s));
  return raw.value ? raw.source : "default";
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

std::vector<std::string> settingsFileProblems() {
  std::vector<std::string> problems;
  for (const SettingsFile& file : settingsFiles()) {
    if (file.location.kind != SettingsFileKind::Loom) continue;  // NCCL's: logged, as NCCL passes them over
    const std::string& path = file.location.path;
    if (!file.readError.ok()) {
      problems.push_back(file.readError.message());
      continue;
    }
    if (!file.exists) {
      if (*file.location.namedBy) problems.push_back(fmt::format("{}={}: no such file", file.location.namedBy, path));
      continue;
    }
    std::vector<std::pair<int, std::string>> lines;  // the file's problems, put in line order below
    for (const ConfMalformed& m : file.conf.malformed)
      lines.emplace_back(m.line, fmt::format("{}:{}: not NAME=VALUE: {}", path, m.line, m.text));
    for (const ConfEntry& e : file.conf.entries) {
      const SettingSpec* spec = nullptr;
      for (const SettingSpec& each : kSettings)
        if (e.name == each.name) spec = &each;
      std::string problem;
      if (!spec) {
        // Another spelling findSetting knows (NCCL's name, no prefix, another case): the one this file takes.
        const SettingSpec* meant = findSetting(e.name);
        problem = meant ? fmt::format("no setting named {}: this file takes {}", e.name, meant->name)
                        : fmt::format("no setting named {} (loom-info --settings lists them)", e.name);
      } else if (const char* why = environmentOnlyReason(spec->id)) {
        problem = fmt::format("{} is read from the environment only: {}", e.name, why);
      } else if (const std::string bad = e.value.empty() ? "" : problemWith(*spec, e.value.c_str()); !bad.empty()) {
        problem = fmt::format("{}={} is {}: {} allows {}", e.name, e.value, bad, e.name, allowedText(*spec));
      }
      if (!problem.empty()) lines.emplace_back(e.line, fmt::format("{}:{}: {}", path, e.line, problem));
    }
    std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& line : lines) problems.push_back(std::move(line.second));
  }
  return problems;
}

Status checkSettingsFiles() {
  const std::vector<std::string> problems = settingsFileProblems();
  if (problems.empty()) return Status::Ok();
  if (problems.size() == 1) return invalidArgument("{}", problems[0]);
  return invalidArgument("{} (and {} more: loom-info --settings lists them)", problems[0], problems.size() - 1);
}

namespace {

// What Loom makes of one NCCL_* assignment, said at INFO where it is not simply read: one of the
// environment's (`where` and `lineSource` empty), or a line of NCCL's files (`where` "path:line: ",
// `lineSource` the source it would be).
void logNcclAssignment(const std::string& where, std::string_view lineSource, const std::string& name,
                       const std::string& value) {
  const SettingSpec* mirror = nullptr;
  for (const SettingSpec& spec : kSettings)
    if (name == spec.nccl) mirror = &spec;
  RawValue used;
  if (mirror && !lineSource.empty()) used = rawValueOf(*mirror);
  if (!mirror) {
    LOOM_INFO(Init, "{}{}={} is set; Loom does not read it", where, name, value);
  } else if (mirror->ncclUse == NcclUse::Similar) {
    LOOM_INFO(Init, "{}{}={} is set; Loom does not read it ({}, the nearest setting, has its own meaning)", where,
              name, value, mirror->name);
  } else if (environmentValue(mirror->name)) {
    LOOM_INFO(Init, "{}{}={} is set; {} is set too and wins", where, name, value, mirror->name);
  } else if (used.value && used.source != lineSource) {
    LOOM_INFO(Init, "{}{}={} is set; {} comes from {}", where, name, value, mirror->name, used.source);
  } else if (mirror->ncclUse == NcclUse::Translated) {
    const NcclTranslation t = translateNcclValue(mirror->id, value);
    if (t.value.empty()) LOOM_INFO(Init, "{}{}={} is set; not read: {}", where, name, value, t.whyNot);
    else if (t.leftOut.empty()) LOOM_INFO(Init, "{}{}={} is read as {}={}", where, name, value, mirror->name, t.value);
    else LOOM_INFO(Init, "{}{}={} is read as {}={}; not read: {}", where, name, value, mirror->name, t.value, t.leftOut);
  } else if (const std::string problem = problemWith(*mirror, value.c_str()); !problem.empty()) {
    LOOM_INFO(Init, "{}{}={} is set; ignored: {} for {} (it allows {})", where, name, value, problem, mirror->name,
              allowedText(*mirror));
  }
}

// NCCL's files: what a file or line gives nothing, and why (NCCL itself passes such lines over silently).
void logNcclFiles() {
  for (const SettingsFile& file : settingsFiles()) {
    if (file.location.kind != SettingsFileKind::Nccl) continue;
    const std::string& path = file.location.path;
    if (!file.readError.ok()) {
      LOOM_WARN(Init, "{}; NCCL's settings in it are not read", file.readError.message());
      continue;
    }
    if (!file.exists) {
      if (*file.location.namedBy) LOOM_INFO(Init, "{}={}: no such file; not read", file.location.namedBy, path);
      continue;
    }
    for (const ConfMalformed& m : file.conf.malformed)
      LOOM_WARN(Init, "{}:{}: not NAME=VALUE, ignored: {}", path, m.line, m.text);
    for (size_t i = 0; i < file.conf.entries.size(); ++i) {
      const ConfEntry& e = file.conf.entries[i];
      if (e.value.empty()) continue;
      const std::string where = fmt::format("{}:{}: ", path, e.line);
      if (e.name.rfind("NCCL_", 0) == 0)
        logNcclAssignment(where, file.sources[i], e.name, e.value);
      else if (e.name.rfind("LOOM_", 0) == 0)
        LOOM_INFO(Init, "{}{}={} is not read: Loom's settings go in loom.conf", where, e.name, e.value);
      else  // NCCL puts every line into the environment; Loom reads its settings and sets no variable
        LOOM_INFO(Init, "{}{}={} is not read: Loom reads NCCL_* names from NCCL's files and sets no environment "
                  "variable from them", where, e.name, e.value);
    }
  }
}

}  // namespace

void logUnreadNcclVariables() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (char** entry = environ; entry && *entry; ++entry) {
      const std::string_view text(*entry);
      const size_t eq = text.find('=');
      if (text.rfind("NCCL_", 0) != 0 || eq == std::string_view::npos || eq + 1 == text.size()) continue;
      const std::string name(text.substr(0, eq)), value(text.substr(eq + 1));
      if (name == "NCCL_CONF_FILE") continue;  // read: it names NCCL's settings file (base/settings_files.h)
      logNcclAssignment("", "", name, value);
    }
    logNcclFiles();
  });
}

}  // namespace loom
