// One settings file's text, parsed: `NAME=VALUE` lines, `#` comment lines and blank lines (the syntax
// of Loom's loom.conf and of NCCL's nccl.conf). Parsing only: which names a file may hold and what they
// mean is the reader's (base/settings_files.h finds the files, base/settings.h reads them).
//   - NAME is a variable's name (a letter or _, then letters, digits, _); blanks around NAME and VALUE
//     are dropped; VALUE is the rest of the line as written (no quotes or escapes are interpreted, and
//     a `#` inside it is part of it: paths may hold one);
//   - a line that is not blank, not a comment and not NAME=VALUE is kept as malformed, with its number,
//     so that the reader can name the file and line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom {

struct ConfEntry {
  std::string name;
  std::string value;  // may be empty ("NAME=")
  int line = 0;       // 1-based
};

struct ConfMalformed {
  int line = 0;
  std::string text;  // the line, blanks trimmed
};

struct ConfFile {
  std::string path;
  std::vector<ConfEntry> entries;        // in the file's order (a later line of one name wins)
  std::vector<ConfMalformed> malformed;  // in the file's order
};

ConfFile parseConfText(std::string path, std::string_view text);

// Reads and parses `path`. A file that does not exist is Ok with *exists false (the default places are
// optional); one that exists but cannot be read (a directory, no permission) is an error naming it.
Status readConfFile(const std::string& path, ConfFile* out, bool* exists);

}  // namespace loom
