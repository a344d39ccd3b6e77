// The files settings are read from below the environment (base/settings.h layers them), in this order
// of precedence:
//   Loom's loom.conf, holding LOOM_* names: $LOOM_CONF_FILE if set, else the user's
//     ($XDG_CONFIG_HOME/loom/loom.conf, ~/.config/loom/loom.conf when that is unset); then /etc/loom.conf;
//   NCCL's, holding NCCL_* names (read as the environment's NCCL_* variables are): $NCCL_CONF_FILE if
//     set, else ~/.nccl.conf; then /etc/nccl.conf.
// The user's file wins over the system's, as NCCL has it for its own. libloom reads NCCL's files in every
// program, not only through the NCCL drop-in: it reads NCCL's environment variables so too, and a
// user who keeps NCCL's settings in ~/.nccl.conf means them as much as one who exports them.
// Read once per process, at the first read of a setting (thread-safe; later reads take no lock: some
// settings are read on every call); the files are not watched, and only tests read them again. Reading
// them logs nothing: the log's own settings are read through here.
#pragma once

#include <string>
#include <vector>

#include "base/conf_file.h"
#include "base/status.h"
#include "base/tools_api.h"

namespace loom {

enum class SettingsFileKind { Loom, Nccl };  // holding LOOM_* names, or NCCL_* names

struct SettingsFileLocation {
  std::string path;
  SettingsFileKind kind = SettingsFileKind::Loom;
  const char* namedBy = "";  // "LOOM_CONF_FILE" or "NCCL_CONF_FILE" when that variable named it
};

struct SettingsFile {
  SettingsFileLocation location;
  bool exists = false;
  Status readError;                  // it exists but could not be read
  ConfFile conf;                     // its lines (none when it is absent or unreadable)
  std::vector<std::string> sources;  // per entry of conf: "path:line", NCCL's "path:line (NCCL_...)"
};

// Where the files are looked for, in precedence order, as the environment says now (LOOM_CONF_FILE,
// NCCL_CONF_FILE, XDG_CONFIG_HOME, HOME); the system's are in `systemDir`.
std::vector<SettingsFileLocation> settingsFileLocations(const std::string& systemDir = "/etc");

// The files as this process read them (the first call reads them), in precedence order, present or not.
// They stay for the life of the process, so that what is read from them (values, sources) may be kept.
LOOM_TOOLS_API const std::vector<SettingsFile>& settingsFiles();

// Tests: the next settingsFiles() reads the files again, from the locations the environment names then,
// the system's in `systemDir` (a test's own directory, so that the machine's files stay out of it). The
// files read before stay too, for what still refers to them.
void rereadSettingsFiles(const std::string& systemDir = "/etc");

}  // namespace loom
