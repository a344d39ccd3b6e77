// LOOM_TOOLS_API marks the library's internal functions that its own command-line tools (loom-info,
// loom-topo, loom-doctor) call. libloom.so exports them (everything else internal stays hidden), so the
// tools link the shared library as a user's program does, and the Python package carries one copy of
// Loom instead of one per tool. Not public API: declared in src/ only, for tools built from the same
// tree; tests/tools/exported_symbols.py holds libloom.so's exports to the C API and these.
#pragma once

#define LOOM_TOOLS_API __attribute__((visibility("default")))
