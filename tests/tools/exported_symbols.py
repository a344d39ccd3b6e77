#!/usr/bin/env python3
"""libloom.so exports the C API and the functions its tools call, nothing else of its own.

Usage: exported_symbols.py LIBLOOM SOURCE_ROOT. The library is compiled with hidden visibility:
what it defines and exports strongly must be a C function of include/ (loom*), or a function that
src/ declares with LOOM_TOOLS_API (src/base/tools_api.h: what loom-info, loom-topo and loom-doctor
call); each of those must be exported, or the tools would not link. Template instantiations of other
libraries' types (weak symbols) are the compiler's and are left alone.
"""
import pathlib
import re
import subprocess
import sys

TOOLS_API = re.compile(r'LOOM_TOOLS_API\s+[^;{]*?\b(\w+)\s*\(')


def main():
    library, root = sys.argv[1], pathlib.Path(sys.argv[2])
    declared = set()
    for header in (root / 'src').rglob('*.h'):
        if header.name != 'tools_api.h':
            declared.update(TOOLS_API.findall(header.read_text()))
    out = subprocess.run(['nm', '-D', '--defined-only', '-C', library], capture_output=True, text=True,
                         check=True).stdout
    strong = []
    for line in out.splitlines():
        parts = line.split(' ', 2)
        if len(parts) == 3 and parts[1] not in ('W', 'V', 'u', 'w', 'v'):
            strong.append(parts[2])
    problems = []
    exported_tools = set()
    for name in strong:
        if re.fullmatch(r'loom[A-Z]\w*', name):
            continue
        # A function returning std::string demangles with its ABI tag: loom::settingText[abi:cxx11](...).
        match = re.match(r'loom::(?:\w+::)*(\w+)(?:\[abi:\w+\])*\(', name)
        if match and match.group(1) in declared:
            exported_tools.add(match.group(1))
            continue
        problems.append(f'exported but neither the C API nor LOOM_TOOLS_API: {name}')
    for name in sorted(declared - exported_tools):
        problems.append(f'declared LOOM_TOOLS_API but not exported: {name}')
    for p in problems:
        print(p)
    print(f'{len(strong)} strong exports, {len(declared)} LOOM_TOOLS_API functions, {len(problems)} problems')
    return 1 if problems or not declared else 0


if __name__ == '__main__':
    sys.exit(main())
