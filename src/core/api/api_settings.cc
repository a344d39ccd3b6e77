// loomParam* (loom.h): the settings table (base/settings.h) through the C API, shaped after NCCL 2.30's
// ncclParam* so that the NCCL drop-in can export those too. A handle is the setting's table entry.
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/settings.h"
#include "core/api/api_result.h"

using namespace loom;

namespace {

const SettingSpec* specOf(loomParamHandle_t h) { return reinterpret_cast<const SettingSpec*>(h); }

// The handle's setting, once the settings files are known good: a value read past a bad line of them
// could differ from what the user wrote, so every read fails as communicator init does.
Status bound(loomParamHandle_t h, const char* call, const SettingSpec** out) {
  if (!h) return invalidArgument("{}: the handle is NULL (bind one with loomParamBind)", call);
  LOOM_TRY(checkSettingsFiles().withContext(call));
  *out = specOf(h);
  return Status::Ok();
}

// The setting as an integer of type T: Integer and Flag settings only, within T's range.
template <class T>
loomResult_t getInteger(loomParamHandle_t h, T* out, const char* call) {
  return apiCall(nullptr, [&]() -> Status {
    const SettingSpec* spec = nullptr;
    LOOM_TRY(bound(h, call, &spec));
    if (!out) return invalidArgument("{}: out is NULL", call);
    if (spec->kind != SettingKind::Integer && spec->kind != SettingKind::Flag)
      return invalidArgument("{}: {} is not an integer setting (loomParamGetStr reads it)", call, spec->name);
    LOOM_TRY(checkSetting(spec->id).withContext(call));
    if (!settingIsSet(spec->id) && std::string(spec->defaultText) == "(computed)")
      return Status(loomInvalidUsage, fmt::format("{}: {} is unset and its default is computed where it is used: {}",
                                                  call, spec->name, spec->meaning));
    const int64_t v = settingInt(spec->id);
    const bool fits = std::numeric_limits<T>::is_signed
                          ? v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                v <= static_cast<int64_t>(std::numeric_limits<T>::max())
                          : v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    if (!fits) return invalidArgument("{}: {}={} does not fit the type asked for", call, spec->name, v);
    *out = static_cast<T>(v);
    return Status::Ok();
  });
}

// The setting as text, as it would be used (a Choice as the table spells it).
std::string textOf(const SettingSpec& spec) {
  return spec.kind == SettingKind::Choice && settingIsSet(spec.id) && checkSetting(spec.id).ok()
             ? settingChoice(spec.id)
             : settingEffective(spec.id);
}

}  // namespace

LOOM_API loomResult_t loomParamBind(loomParamHandle_t* out, const char* key) {
  return apiCall(nullptr, [&]() -> Status {
    if (!out || !key) return invalidArgument("loomParamBind: {} is NULL", out ? "key" : "out");
    const SettingSpec* spec = findSetting(key);
    if (!spec) return invalidArgument("loomParamBind: no setting named {} (loom-info --settings lists them)", key);
    *out = reinterpret_cast<loomParamHandle_t>(const_cast<SettingSpec*>(spec));
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomParamGetI8(loomParamHandle_t h, int8_t* out) { return getInteger(h, out, "loomParamGetI8"); }
LOOM_API loomResult_t loomParamGetI16(loomParamHandle_t h, int16_t* out) { return getInteger(h, out, "loomParamGetI16"); }
LOOM_API loomResult_t loomParamGetI32(loomParamHandle_t h, int32_t* out) { return getInteger(h, out, "loomParamGetI32"); }
LOOM_API loomResult_t loomParamGetI64(loomParamHandle_t h, int64_t* out) { return getInteger(h, out, "loomParamGetI64"); }
LOOM_API loomResult_t loomParamGetU8(loomParamHandle_t h, uint8_t* out) { return getInteger(h, out, "loomParamGetU8"); }
LOOM_API loomResult_t loomParamGetU16(loomParamHandle_t h, uint16_t* out) { return getInteger(h, out, "loomParamGetU16"); }
LOOM_API loomResult_t loomParamGetU32(loomParamHandle_t h, uint32_t* out) { return getInteger(h, out, "loomParamGetU32"); }
LOOM_API loomResult_t loomParamGetU64(loomParamHandle_t h, uint64_t* out) { return getInteger(h, out, "loomParamGetU64"); }

LOOM_API loomResult_t loomParamGetStr(loomParamHandle_t h, const char** out) {
  return apiCall(nullptr, [&]() -> Status {
    const SettingSpec* spec = nullptr;
    LOOM_TRY(bound(h, "loomParamGetStr", &spec));
    if (!out) return invalidArgument("loomParamGetStr: out is NULL");
    thread_local std::string text;
    text = textOf(*spec);
    *out = text.c_str();
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomParamGet(loomParamHandle_t h, void* out, int maxLen, int* len) {
  return apiCall(nullptr, [&]() -> Status {
    const SettingSpec* spec = nullptr;
    LOOM_TRY(bound(h, "loomParamGet", &spec));
    if (!out || !len || maxLen < 0) return invalidArgument("loomParamGet: out, len must not be NULL, maxLen negative");
    const std::string text = textOf(*spec);
    *len = static_cast<int>(text.size() + 1);
    if (maxLen < *len)
      return invalidArgument("loomParamGet: {} needs {} bytes, the buffer holds {}", spec->name, *len, maxLen);
    std::memcpy(out, text.c_str(), text.size() + 1);
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomParamGetParameter(const char* key, const char** value, int* valueLen) {
  return apiCall(nullptr, [&]() -> Status {
    if (!key || !value) return invalidArgument("loomParamGetParameter: {} is NULL", key ? "value" : "key");
    const SettingSpec* spec = findSetting(key);
    if (!spec) return invalidArgument("loomParamGetParameter: no setting named {}", key);
    LOOM_TRY(checkSettingsFiles().withContext("loomParamGetParameter"));
    thread_local std::string text;
    text = textOf(*spec);
    *value = text.c_str();
    if (valueLen) *valueLen = static_cast<int>(text.size());
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomParamGetAllParameterKeys(const char*** table, int* tableLen) {
  return apiCall(nullptr, [&]() -> Status {
    if (!table || !tableLen) return invalidArgument("loomParamGetAllParameterKeys: {} is NULL", table ? "tableLen" : "table");
    thread_local std::vector<const char*> keys;
    keys.clear();
    for (const SettingSpec& spec : allSettings()) keys.push_back(spec.name);
    *table = keys.data();
    *tableLen = static_cast<int>(keys.size());
    return Status::Ok();
  });
}

LOOM_API void loomParamDumpAll(void) {
  const bool logging = logEnabled(LogLevel::Info, LogSubsys::Init);
  std::vector<std::string> lines;
  for (const SettingSpec& spec : allSettings())
    lines.push_back(fmt::format("{}={} ({}; default {})", spec.name, textOf(spec), settingSource(spec.id),
                                *spec.defaultText ? spec.defaultText : "unset"));
  for (const std::string& problem : settingsFileProblems()) lines.push_back("settings file: " + problem);
  for (const std::string& line : lines) {
    if (logging)
      LOOM_INFO(Init, "{}", line);
    else
      std::fprintf(stderr, "%s\n", line.c_str());
  }
}
