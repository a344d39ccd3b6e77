// Loom's settings (LOOM_* environment variables), declared once in settings.def with their type,
// default, allowed values, subsystem, meaning and the NCCL variable each mirrors, and read only here.
// Where settings.def marks the NCCL variable Honoured it is read too, when the LOOM_ one is unset (so
// that NCCL's environment configures the NCCL drop-in); a value of it that Loom cannot use is ignored
// and logged at INFO.
// Below the environment are the settings files (base/settings_files.h): Loom's loom.conf, under the
// LOOM_ names, then NCCL's files, under the NCCL names read as the environment's are. A value is read
// at every call (values are cheap to read, and tests change the environment; the files are read once
// per process); a bad one in the environment is a loomInvalidArgument naming the setting and what it
// allows (checkSetting, at the places that read it at init), or a warning naming both and the default,
// as settings.def says per setting. A bad line of Loom's files gives no value, and is the error of
// communicator init and loomParam* (checkSettingsFiles), naming the file and line; one of NCCL's files
// is logged and passed over, as NCCL passes it over. The public face of the table is loomParam* (loom.h),
// shaped after NCCL 2.30's ncclParam*, and `loom-info --settings`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// Whether the environment or a settings file sets it (to something not empty): its LOOM_ variable, an
// honoured NCCL one with a value Loom can use, or a line of the files giving either.
bool settingIsSet(Setting s);
// Where the value comes from: "environment", "environment (NCCL_...)", a settings file's line
// ("/etc/loom.conf:3", "/home/u/.nccl.conf:2 (NCCL_...)") or "default".
LOOM_TOOLS_API const char* settingSource(Setting s);
// Ok, or loomInvalidArgument naming the setting, its value and what it allows (LOOM_ variables only:
// an NCCL one Loom cannot use is ignored; the files' lines are checkSettingsFiles's).
Status checkSetting(Setting s);
// Each bad line of Loom's settings files ("path:line: what is wrong"), or a LOOM_CONF_FILE that names no
// file or one that cannot be read: a line not NAME=VALUE, a name that is no setting (or one read from
// the environment only: LOOM_CONF_FILE, LOOM_LIBRARY, LOOM_FIXTURES), a value the setting refuses.
LOOM_TOOLS_API std::vector<std::string> settingsFileProblems();
// Ok, or loomInvalidArgument naming the first of them (communicator init and loomParam* return it).
Status checkSettingsFiles();
// Logs at INFO, once per process, each NCCL_* variable of the environment, and each line of NCCL's
// settings files, that Loom does not read (communicator init calls it: a user of the NCCL drop-in learns
// what has no effect); a line of NCCL's files that is not NAME=VALUE, or a file that cannot be read, at WARN.
void logUnreadNcclVariables();

// The value as text: the environment's or a file's, else the default ("" for unset Text, and for
// computed ones).
LOOM_TOOLS_API std::string settingText(Setting s);
// Integer and Flag settings: the value set (decimal, 0x.., K/M/G) when valid, else the
// default (a warning says so). `computed`: the default of a "(computed)" setting.
LOOM_TOOLS_API int64_t settingInt(Setting s);
int64_t settingInt(Setting s, int64_t computed);
// An Integer setting's default in the table, whatever the environment says: what a communicator runs
// with when nothing is set (the cost model's defaults are these, so that a default prediction times a
// default communicator).
int64_t settingDefaultInt(Setting s);
bool settingFlag(Setting s);
// Choice settings: the value set when it is one of the allowed words (as the table spells
// it), else the default (a warning says so); "" when unset without a default.
std::string settingChoice(Setting s);

// The value as it would be used, as text (a computed default says "(computed)").
LOOM_TOOLS_API std::string settingEffective(Setting s);

// A value a communicator uses and where it came from: settingSource's text, or a field of the
// loomConfig_t it was made with ("loomConfig_t.timeoutMs"). Its init log and graph dump list them.
struct SettingOrigin {
  Setting id;
  std::string value;
  std::string source;
};
SettingOrigin originOf(Setting s);

}  // namespace loom
