// Loom's settings (LOOM_* environment variables), declared once in settings.def with their type,
// default, allowed values, subsystem, meaning and the NCCL variable each mirrors, and read only here.
// Where settings.def marks the NCCL variable Honoured it is read too, when the LOOM_ one is unset (so
// that NCCL's environment configures the NCCL drop-in); a value of it that Loom cannot use is ignored
// and logged at INFO.
// A value is read from the environment at every call (values are cheap to read, and tests change
// them); a bad one is a loomInvalidArgument naming the setting and what it allows (checkSetting, at the
// places that read it at init), or a warning naming both and the default, as settings.def says per
// setting. The public face of the table is loomParam* (loom.h), shaped after NCCL 2.30's ncclParam*,
// and `loom-info --settings`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/tools_api.h"

namespace loom {

enum class Setting : int {
#define LOOM_SETTING(id, name, kind, deflt, allowed, onInvalid, subsystem, meaning, nccl, ncclUse) id,
#include "base/settings.def"
#undef LOOM_SETTING
};

enum class SettingKind { Text, Integer, Flag, Choice };
enum class OnInvalid { Error, Fallback };
// Honoured: the NCCL variable is read when the LOOM_ one is unset; Translated: the same, its value in
// NCCL's syntax turned into Loom's (base/nccl_values.h); Similar: named for reference only.
enum class NcclUse { None, Honoured, Translated, Similar };

struct SettingSpec {
  Setting id;
  const char* name;         // "LOOM_TIMEOUT_MS"
  SettingKind kind;
  const char* defaultText;  // "" (unset), "(computed)" (the reader supplies it), or the value
  const char* allowed;      // Integer: "lo..hi" or "lo.."; Flag: "0|1"; Choice: "a|b|c"; Text: a hint
  OnInvalid onInvalid;
  const char* subsystem;
  const char* meaning;
  const char* nccl;         // the NCCL variable it mirrors, or ""
  NcclUse ncclUse;
};

// Every setting, in settings.def's order.
LOOM_TOOLS_API std::span<const SettingSpec> allSettings();
const SettingSpec& specOf(Setting s);
// By name, with or without the LOOM_ prefix, or by the NCCL variable it reads (Honoured), any case;
// null when there is none.
const SettingSpec* findSetting(std::string_view name);

// Whether the environment sets it (to something not empty): its LOOM_ variable, or an honoured NCCL one
// with a value Loom can use.
bool settingIsSet(Setting s);
// Where the value comes from: "environment", "environment (NCCL_...)" or "default".
LOOM_TOOLS_API const char* settingSource(Setting s);
// Ok, or loomInvalidArgument naming the setting, its value and what it allows (LOOM_ variables only:
// an NCCL one Loom cannot use is ignored).
Status checkSetting(Setting s);
// Logs at INFO, once per process, each NCCL_* variable of the environment that Loom does not read
// (communicator init calls it: a user of the NCCL drop-in learns what has no effect).
void logUnreadNcclVariables();

// The value as text: the environment's, else the default ("" for unset Text, and for computed ones).
LOOM_TOOLS_API std::string settingText(Setting s);
// Integer and Flag settings: the environment's value (decimal, 0x.., K/M/G) when valid, else the
// default (a warning says so). `computed`: the default of a "(computed)" setting.
int64_t settingInt(Setting s);
int64_t settingInt(Setting s, int64_t computed);
// An Integer setting's default in the table, whatever the environment says: what a communicator runs
// with when nothing is set (the cost model's defaults are these, so that a default prediction times a
// default communicator).
int64_t settingDefaultInt(Setting s);
bool settingFlag(Setting s);
// Choice settings: the environment's value when it is one of the allowed words (as the table spells
// it), else the default (a warning says so); "" when unset without a default.
std::string settingChoice(Setting s);

// The value as it would be used, as text (a computed default says "(computed)").
LOOM_TOOLS_API std::string settingEffective(Setting s);

// A value a communicator uses and where it came from: "default", "environment", or a field of the
// loomConfig_t it was made with ("loomConfig_t.timeoutMs"). Its init log and graph dump list them.
struct SettingOrigin {
  Setting id;
  std::string value;
  std::string source;
};
SettingOrigin originOf(Setting s);

}  // namespace loom
