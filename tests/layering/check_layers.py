#!/usr/bin/env python3
"""Checks the library's layering (docs/DESIGN.md, docs/ARCHITECTURE.md) on its #include lines:

- CUDA headers (cuda*.h, cuda/..., cub/, thrust/, nvml.h, ...) are included only in src/device and
  src/kernels/cuda, so that everything CUDA-only lives in those two folders;
- core reaches the device layer only through its seam (device/device_layer.h, and the gate it exposes);
- nothing below core includes core, and the device layer includes neither transports nor bootstrap;
- the bindings (bindings/) include only the public headers (include/) and their own files: an
  application's view of the library; so does loom-sim (tools/sim), the model API's client.

bindings/ and tools/ are held to the first rule too, except loom-perf's own device buffers
(tools/perf/device_buffers.cc: a benchmark allocates and fills CUDA memory as any application does,
as nccl-tests does). tests/ are applications of the library and are not checked.
Usage: check_layers.py SOURCE_ROOT. Prints what it checked; exits 1 naming every violation."""
import pathlib
import re
import sys

CUDA_HEADER = re.compile(r'#\s*include\s*[<"]((cuda|cub|thrust|nvml|nvrtc|cublas|curand|cufft|nccl)[^>"]*)[>"]')
LOCAL_INCLUDE = re.compile(r'#\s*include\s*"([^"]+)"')
SOURCES = ('.c', '.cc', '.cpp', '.h', '.hpp', '.cu', '.cuh')
CUDA_FOLDERS = ('src/device/', 'src/kernels/cuda/')
CUDA_USERS = {'tools/perf/device_buffers.cc'}
SEAM = {'device/device_layer.h', 'device/operation_gate.h'}
PUBLIC_ONLY = ('bindings/', 'tools/sim/')  # clients of the public API only
BELOW_CORE = ('src/base/', 'src/bootstrap/', 'src/topology/', 'src/algorithms/', 'src/transport/', 'src/kernels/',
              'src/device/')


def main(root: pathlib.Path) -> int:
    problems, checked = [], 0
    for top in ('src', 'bindings', 'tools'):
        for path in sorted((root / top).rglob('*')):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            checked += 1
            for number, line in enumerate(path.read_text(errors='replace').splitlines(), 1):
                where = f'{rel}:{number}'
                cuda = CUDA_HEADER.search(line)
                if cuda and not rel.startswith(CUDA_FOLDERS) and rel not in CUDA_USERS:
                    problems.append(f'{where}: includes the CUDA header <{cuda.group(1)}> outside src/device and '
                                    'src/kernels/cuda')
                local = LOCAL_INCLUDE.search(line)
                if not local:
                    continue
                header = local.group(1)
                if rel.startswith('src/core/') and header.startswith('device/') and header not in SEAM:
                    problems.append(f'{where}: core includes {header}; it may reach the device layer only through '
                                    'device/device_layer.h')
                if rel.startswith(BELOW_CORE) and header.startswith('core/'):
                    problems.append(f'{where}: includes {header}, but nothing below core includes core')
                if rel.startswith(PUBLIC_ONLY) and not (path.parent / header).exists() and \
                        not (root / 'include' / header).exists():
                    problems.append(f'{where}: includes {header}, which is not a public header (include/); {rel.split("/")[0]}/{rel.split("/")[1]} is a client of the public API only')
                if rel.startswith('src/device/') and header.startswith(('transport/', 'bootstrap/')):
                    problems.append(f'{where}: the device layer includes {header} (it depends on base, algorithms '
                                    'and kernels only)')
    print(f'checked the #include lines of {checked} files under src/, bindings/ and tools/')
    for p in problems:
        print(p)
    print(f'{len(problems)} layering violation(s)')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else '.')))
