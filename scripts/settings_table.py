#!/usr/bin/env python3
"""README's table of settings, made from their one declaration (src/base/settings.def), and the checks
that keep it so.

    python3 scripts/settings_table.py              print the table (markdown)
    python3 scripts/settings_table.py --write      put it into README.md, between its markers
    python3 scripts/settings_table.py --check      exit 1 when README.md's table differs from the
                                                   declarations, or when a shipped program reads a
                                                   LOOM_* variable the table does not declare, or a C or
                                                   C++ file reads one anywhere but src/base/settings.cc
                                                   (C and C++ programs read them through base/settings.h
                                                   or loomParamGetParameter; Python ones, which may not
                                                   have loaded the library yet, read declared ones)

--root DIR names the repository (default: this script's).
"""
import argparse
import pathlib
import re
import sys

BEGIN = "<!-- settings table: made by scripts/settings_table.py from src/base/settings.def -->"
END = "<!-- end of the settings table -->"
ENTRY = re.compile(r'LOOM_SETTING\((\w+),\s*"(LOOM_\w+)",\s*(\w+),\s*"([^"]*)",\s*"([^"]*)",\s*(\w+),\s*"([^"]*)",\s*'
                   r'((?:"[^"]*"\s*)+),\s*"([^"]*)",\s*(\w+)\)', re.S)
# Reads of LOOM_* variables, in C, C++ and Python.
READS = re.compile(r'(getenv|envString|environ\.get|environ\[)\s*\(?\s*["\'](LOOM_\w+)["\']')
THE_READER = "src/base/settings.cc"


def declarations(root):
    text = "\n".join(line for line in (root / "src/base/settings.def").read_text().splitlines()
                     if not line.lstrip().startswith("//"))
    found = []
    for m in ENTRY.finditer(text):
        meaning = "".join(re.findall(r'"([^"]*)"', m.group(8)))
        found.append({"name": m.group(2), "kind": m.group(3), "default": m.group(4), "allowed": m.group(5),
                      "on_invalid": m.group(6), "subsystem": m.group(7), "meaning": meaning, "nccl": m.group(9),
                      "nccl_use": m.group(10)})
    declared = len(re.findall(r"^LOOM_SETTING\(", text, re.M))
    if declared != len(found):
        raise SystemExit(f"settings.def: {declared} LOOM_SETTING lines, {len(found)} understood")
    return found


def cell(text):
    return text.replace("|", "\\|")


def nccl_cell(d):
    if not d["nccl"]:
        return ""
    if d["nccl_use"] == "Honoured":
        return f"`{d['nccl']}`"
    if d["nccl_use"] == "Translated":
        return f"`{d['nccl']}` (NCCL's syntax, translated)"
    return f"(`{d['nccl']}`: not read)"


def table(root):
    # NCCL's column: the NCCL variable read when the LOOM_ one is unset, or (in parentheses) the nearest
    # one, whose meaning or syntax differs and which Loom does not read.
    rows = ["| variable | default | allowed | meaning | NCCL's |", "|---|---|---|---|---|"]
    for d in declarations(root):
        default = d["default"] or "unset"
        allowed = d["allowed"] if d["kind"] != "Choice" else d["allowed"].replace("|", ", ")
        rows.append(f"| `{d['name']}` | {cell(default)} | {cell(allowed)} | {cell(d['subsystem'])}: {cell(d['meaning'])} "
                    f"| {nccl_cell(d)} |")
    return "\n".join(rows) + "\n"


def readme_parts(readme):
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: no settings table markers ({BEGIN!r} ... {END!r})")
    head, rest = text.split(BEGIN, 1)
    body, tail = rest.split(END, 1)
    return head, body, tail


def stray_reads(root):
    declared = {d["name"] for d in declarations(root)}
    problems = []
    for top in ("src", "tools", "bindings", "examples", "perf"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in (".c", ".cc", ".h", ".cu", ".cuh", ".py") or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            if rel == THE_READER:
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                for m in READS.finditer(line):
                    name = m.group(2)
                    if name not in declared:
                        problems.append(f"{rel}:{number}: reads {name}, which src/base/settings.def does not declare")
                    elif path.suffix != ".py":
                        problems.append(f"{rel}:{number}: reads {name} itself (through base/settings.h in the "
                                        "library, loomParamGetParameter outside it)")
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parents[1])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    args = p.parse_args()
    made = table(args.root)
    readme = args.root / "README.md"
    if args.write:
        head, _, tail = readme_parts(readme)
        readme.write_text(head + BEGIN + "\n" + made + END + tail)
        return 0
    if not args.check:
        sys.stdout.write(made)
        return 0
    problems = []
    _, body, _ = readme_parts(readme)
    if body.strip() != made.strip():
        documented = set(re.findall(r"`(LOOM_\w+)`", body))
        declared = {d["name"] for d in declarations(args.root)}
        for name in sorted(declared - documented):
            problems.append(f"README.md: {name} is declared but not in the table")
        for name in sorted(documented - declared):
            problems.append(f"README.md: {name} is in the table but not declared")
        problems.append("README.md's settings table differs from src/base/settings.def: "
                        "run python3 scripts/settings_table.py --write")
    problems += stray_reads(args.root)
    for line in problems:
        print(line)
    print(f"{len(declarations(args.root))} settings declared; {'OK' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
