#!/usr/bin/env python3
"""Checks that a library carries CUDA machine code for the required GPU architectures.

Usage: check_cubins.py LIBRARY [--require sm_90 ...] [--ptx compute_90] [--cuobjdump PATH]

Lists the embedded code with `cuobjdump --list-elf/--list-ptx` when cuobjdump is available (PATH,
--cuobjdump or $CUOBJDUMP); otherwise reads the ELF's .nv_fatbin section itself (fatbin header:
magic 0xBA55ED50; each entry: kind 1 = PTX, 2 = ELF cubin, architecture at byte 28). Prints what it
found, and exits 1 when a required architecture is missing.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys


def section(path, name):
    with open(path, 'rb') as f:
        data = f.read()
    if data[:4] != b'\x7fELF' or data[4] != 2:
        raise SystemExit(f'{path}: not a 64-bit ELF file')
    shoff, = struct.unpack_from('<Q', data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', data, 0x3A)
    def header(i):
        return struct.unpack_from('<IIQQQQIIQQ', data, shoff + i * shentsize)
    strtab = header(shstrndx)
    for i in range(shnum):
        h = header(i)
        start = strtab[4] + h[0]
        sname = data[start:data.index(b'\0', start)].decode()
        if sname == name:
            return data[h[4]:h[4] + h[5]]
    return b''


def parse_fatbin(blob):
    found = []
    off = 0
    while off + 16 <= len(blob):
        magic, _ver, hsize, fsize = struct.unpack_from('<IHHQ', blob, off)
        if magic != 0xBA55ED50:
            off += 8  # fatbins are 8-byte aligned within the section
            continue
        entry, end = off + hsize, off + hsize + fsize
        while entry + 32 <= end:
            kind, _ev, ehsize, psize = struct.unpack_from('<HHIQ', blob, entry)
            arch, = struct.unpack_from('<I', blob, entry + 28)
            found.append(('elf' if kind == 2 else 'ptx' if kind == 1 else f'kind{kind}', arch))
            entry += ehsize + psize
        off = end
    return found


def list_with_cuobjdump(tool, lib):
    found = []
    for flag, kind in (('--list-elf', 'elf'), ('--list-ptx', 'ptx')):
        out = subprocess.run([tool, flag, lib], capture_output=True, text=True)
        sys.stdout.write(out.stdout)
        if out.returncode != 0 and 'does not contain' not in out.stderr:
            sys.stderr.write(out.stderr)
        for m in re.finditer(r'sm_(\d+)', out.stdout):
            found.append((kind, int(m.group(1))))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('library')
    ap.add_argument('--require', action='append', default=[], help='sm_XY machine code that must be present')
    ap.add_argument('--ptx', action='append', default=[], help='compute_XY PTX that must be present')
    ap.add_argument('--cuobjdump', default=os.environ.get('CUOBJDUMP') or shutil.which('cuobjdump'))
    args = ap.parse_args()

    if args.cuobjdump and os.path.exists(args.cuobjdump):
        print(f'# {args.cuobjdump} --list-elf/--list-ptx {args.library}')
        found = list_with_cuobjdump(args.cuobjdump, args.library)
    else:
        print(f'# no cuobjdump: reading .nv_fatbin of {args.library} directly')
        found = parse_fatbin(section(args.library, '.nv_fatbin'))
        for kind, arch in found:
            print(f'{"ELF file" if kind == "elf" else "PTX file"}: sm_{arch}')
    missing = [r for r in args.require if ('elf', int(r.split('_')[1])) not in found]
    missing += [p for p in args.ptx if ('ptx', int(p.split('_')[1])) not in found]
    if missing:
        print('MISSING: ' + ' '.join(missing))
        return 1
    print('OK: ' + ' '.join(args.require + args.ptx))
    return 0


if __name__ == '__main__':
    sys.exit(main())
