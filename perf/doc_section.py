#!/usr/bin/env python3
"""Replaces (or appends) one "## " section of docs/PERFORMANCE.md, so that each benchmark rewrites only
its own figures.

usage: doc_section.py "## Heading" BODY_FILE [DOC]"""
import pathlib
import sys


def replace_section(doc, heading, body):
    path = pathlib.Path(doc)
    text = path.read_text() if path.exists() else "# Performance\n\n"
    section = f"{heading}\n\n{body.strip()}\n"
    if heading in text:
        start = text.index(heading)
        end = text.find("\n## ", start + len(heading))
        text = text[:start] + section + (text[end:] if end >= 0 else "")
    else:
        text = text.rstrip() + "\n\n" + section
    path.write_text(text)


if __name__ == "__main__":
    heading, body_file = sys.argv[1], sys.argv[2]
    replace_section(sys.argv[3] if len(sys.argv) > 3 else "docs/PERFORMANCE.md", heading,
                    pathlib.Path(body_file).read_text())
    print("wrote", heading)
