#!/usr/bin/env python3
"""Holds the rules that keep a unity build meaning what its sources say one by one.

Meson's unity build (the project's default) compiles each target's sources in batches: one generated
file includes several .cc files, so what one file declares at namespace scope is seen by the files
after it. Most clashes then fail to compile (two definitions of one type, variable or signature), but
three do not, and this check finds them in every batch of a configured build directory:

  - two files of a batch defining free functions of one name (each in its own anonymous namespace,
    with different parameters): they become overloads, and a call in one file may silently pick the
    other file's function;
  - a using-directive of a namespace the project does not declare (std::..., a library's): it changes
    which names later files' unqualified calls find;
  - a #define in a source file that the file does not #undef: it rewrites the files after it.

Usage: unity_check.py BUILD_DIR [SOURCE_ROOT], or unity_check.py --self-test (a made-up batch with one
hazard of each kind must give exactly those three findings). Needs universal-ctags (scripts/install-deps.sh).
Exit 0 when every batch holds, 1 with one line per finding, 2 when it cannot check.
"""
import collections
import json
import pathlib
import re
import shutil
import subprocess
import sys

INCLUDE = re.compile(r'#include\s*[<"](.+?)[>"]')
DEFINE = re.compile(r'^\s*#\s*define\s+(\w+)', re.M)
UNDEF = re.compile(r'^\s*#\s*undef\s+(\w+)', re.M)
# Macro invocations that ctags reads as function definitions.
NOT_FUNCTIONS = re.compile(r'^(__anon|[A-Z][A-Z0-9_]*$|main$)')


def ctags(files, kinds, extra=()):
    out = subprocess.run(['ctags', '--languages=C++', '--language-force=C++', f'--kinds-C++={kinds}',
                          '--fields=+sKr', '--output-format=json', *extra, '-f', '-', *files],
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith('{')]


def project_namespaces(root):
    sources = [str(p) for d in ('src', 'tests', 'tools', 'perf', 'bindings', 'examples', 'include')
               for p in (root / d).rglob('*') if p.suffix in ('.h', '.cc', '.cu', '.cuh', '.hpp')]
    names = set()
    for tag in ctags(sources, 'n'):
        names.update(part for part in tag['name'].split('::') if part)
    return names


def batch_sources(batch):
    return [str(pathlib.Path(m.group(1)).resolve()) for m in INCLUDE.finditer(batch.read_text())]


def check_batch(batch, files, namespaces, root):
    findings = []
    where = lambda f: str(pathlib.Path(f).relative_to(root)) if f.startswith(str(root)) else f
    defined_in = collections.defaultdict(set)
    for tag in ctags(files, 'fU', ['--extras=+r']):
        if tag.get('kind') == 'using':
            parts = [p for p in tag['name'].split('::') if p]
            if any(p not in namespaces for p in parts):
                findings.append(f'{batch.name}: {where(tag["path"])}: using namespace {tag["name"]} '
                                f'(a using-declaration or function scope keeps it in the file)')
            continue
        if NOT_FUNCTIONS.match(tag['name']) or tag.get('scopeKind') in ('class', 'struct', 'union', 'function', 'enum'):
            continue
        defined_in[tag['name'].split('::')[-1]].add(tag['path'])
    for name, paths in sorted(defined_in.items()):
        if len(paths) > 1:
            findings.append(f'{batch.name}: function {name} defined in {", ".join(sorted(map(where, paths)))}')
    for f in files:
        text = pathlib.Path(f).read_text(errors='replace')
        for macro in sorted(set(DEFINE.findall(text)) - set(UNDEF.findall(text))):
            findings.append(f'{batch.name}: {where(f)}: #define {macro} without #undef at the end of the file')
    return findings


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / 'src').mkdir()
        (root / 'src' / 'a.cc').write_text('namespace demo {\nnamespace {\nint pick(int x) { return x; }\n}\n}\n'
                                           'using namespace std::chrono_literals;\n#define LEAKS 1\n'
                                           '#define KEPT 2\n#undef KEPT\n')
        (root / 'src' / 'b.cc').write_text('namespace demo {\nnamespace {\nint pick(long x) { return 2; }\n'
                                           'int other() { return pick(1); }\n}\n}\nusing namespace demo;\n')
        batch = root / 'demo-unity0.cpp'
        batch.write_text(''.join(f'#include<{root / "src" / n}>\n' for n in ('a.cc', 'b.cc')))
        found = check_batch(batch, batch_sources(batch), project_namespaces(root), root)
    expected = ['function pick defined in', 'using namespace std::chrono_literals', '#define LEAKS']
    ok = len(found) == len(expected) and all(any(e in f for f in found) for e in expected)
    print('\n'.join(found))
    print(f'unity_check self-test: {"passed" if ok else "FAILED, expected one finding each of " + str(expected)}')
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test() if shutil.which('ctags') else 2
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = pathlib.Path(sys.argv[1]).resolve()
    root = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else pathlib.Path(__file__).parent.parent).resolve()
    if not shutil.which('ctags'):
        print('unity_check: universal-ctags is missing (scripts/install-deps.sh installs it)', file=sys.stderr)
        return 2
    batches = sorted(p for p in build.rglob('*-unity*.cpp'))
    if not batches:
        print(f'unity_check: no unity batches under {build} (configured with -Dunity=off?)', file=sys.stderr)
        return 2
    namespaces = project_namespaces(root)
    findings, checked = [], 0
    for batch in batches:
        files = batch_sources(batch)
        if len(files) < 2:
            continue
        checked += 1
        findings += check_batch(batch, files, namespaces, root)
    for line in findings:
        print(line)
    print(f'unity_check: {checked} batches of several sources, {len(findings)} findings', file=sys.stderr)
    return 1 if findings else 0


if __name__ == '__main__':
    sys.exit(main())
