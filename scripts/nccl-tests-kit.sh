#!/usr/bin/env bash
# NVIDIA's nccl-tests for the GPU kit (scripts/gpu-kit.sh): built here, unmodified, from the snapshot
# beside the repository (../shared/third_party/nccl-tests, or LOOM_NCCL_TESTS_SRC), as an MPI build
# against MPICH, for sm_90 (the GPU machine's H100/H200), compiled against NVIDIA's nccl.h (the CUDA
# toolkit's: the header only) and linked against Loom's libnccl.so.2 (the build's src/compat), which is
# what they load at run time there. Packed with what mpiexec needs on a machine without MPICH (Hydra,
# libmpich and its UCX, numactl and Slurm libraries) and the tests' licence, into OUT.tar.xz:
#   nccl-tests/bin/<collective>_perf_mpi, verifiable/libverifiable.so.0   the tests
#   nccl-tests/mpich/bin/mpiexec.hydra, hydra_pmi_proxy                  the launcher
#   nccl-tests/mpich/lib/...                                             the libraries the tests and Hydra load
#   nccl-tests/LICENSE.txt, SNAPSHOT
#
#   bash scripts/nccl-tests-kit.sh BUILD_DIR OUT   (OUT: a path without .tar.xz)
# Nothing is written into the snapshot: make's objects go to a temporary folder.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:?usage: nccl-tests-kit.sh BUILD_DIR OUT}"
out="${2:?usage: nccl-tests-kit.sh BUILD_DIR OUT}"
src="${LOOM_NCCL_TESTS_SRC:-$root/../shared/third_party/nccl-tests}"
[ -f "$src/src/Makefile" ] || { echo "nccl-tests-kit: no nccl-tests snapshot at $src" >&2; exit 1; }
[ -e "$build/src/compat/libnccl.so.2" ] || { echo "nccl-tests-kit: $build has no src/compat/libnccl.so.2" >&2; exit 1; }
nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
cuda_home="$(cd "$(dirname "$nvcc")/.." && pwd)"
header=""
for h in "$cuda_home/include/nccl.h" /usr/local/include/nccl.h /usr/include/nccl.h; do
  [ -f "$h" ] && { header=$h; break; }
done
[ -n "$header" ] || { echo "nccl-tests-kit: no NVIDIA nccl.h (the CUDA toolkit's) to compile against" >&2; exit 1; }
mpi_include="$(dirname "$(find /usr/include -path '*mpich/mpi.h' 2>/dev/null | head -n 1)")"
[ -f "$mpi_include/mpi.h" ] || { echo "nccl-tests-kit: no MPICH (libmpich-dev, scripts/install-deps.sh installs it)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# NCCL_HOME: NVIDIA's header, Loom's library (libnccl.so for the linker).
mkdir -p "$work/nccl/include" "$work/nccl/lib"
cp "$header" "$work/nccl/include/"
cp "$(readlink -f "$build/src/compat/libnccl.so.2")" "$work/nccl/lib/libnccl.so.2"
ln -s libnccl.so.2 "$work/nccl/lib/libnccl.so"
# MPI_HOME: MPICH's header folder holds include/, its library is on the linker's own path.
mkdir -p "$work/mpi"
ln -s "$mpi_include" "$work/mpi/include"
start=$SECONDS
make -C "$src/src" -j"$(nproc)" MPI=1 MPI_HOME="$work/mpi" NCCL_HOME="$work/nccl" CUDA_HOME="$cuda_home" DSO=1 \
  NAME_SUFFIX=_mpi NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$work/build" >"$work/make.log" 2>&1 ||
  { tail -30 "$work/make.log"; exit 1; }
# The tests must bind Loom's library, never NVIDIA's: ours is the one they were linked against.
if ! LD_LIBRARY_PATH="$work/nccl/lib" ldd "$work/build/all_reduce_perf_mpi" | grep -q "$work/nccl/lib/libnccl.so.2"; then
  echo "nccl-tests-kit: all_reduce_perf_mpi does not bind the libnccl.so.2 it was linked against" >&2
  exit 1
fi

pack="$work/pack/nccl-tests"
mkdir -p "$pack/bin/verifiable" "$pack/mpich/bin" "$pack/mpich/lib"
cp "$work"/build/*_perf_mpi "$pack/bin/"
cp "$work/build/verifiable/libverifiable.so.0" "$pack/bin/verifiable/"
cp "$src/LICENSE.txt" "$src/SNAPSHOT" "$pack/" 2>/dev/null || cp "$src/LICENSE.txt" "$pack/"
hydra="$(readlink -f "$(command -v mpiexec.hydra)")"
cp "$hydra" "$pack/mpich/bin/mpiexec.hydra"
cp "$(dirname "$hydra")/hydra_pmi_proxy" "$pack/mpich/bin/"
# The shared libraries the tests and Hydra load beyond glibc, libstdc++, the CUDA runtime (the GPU
# machine's toolkit), libnccl (Loom's, from the kit's prebuilt binaries) and hwloc (the kit's own).
ldd "$pack/bin/all_reduce_perf_mpi" "$pack/mpich/bin/mpiexec.hydra" | awk '$3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libresolv.so*|libgcc_s.so*|libstdc++.so*|libcudart.so*|libnccl.so*|libhwloc.so*|libudev.so*|libverifiable.so*) ;;
      *) cp "$(readlink -f "$path")" "$pack/mpich/lib/$name" ;;
    esac
  done
# UCX's transports are modules it opens by itself, from the ucx/ folder beside libucs.
ucs="$(ldd "$pack/bin/all_reduce_perf_mpi" | awk '/libucs.so/ {print $3}')"
if [ -n "$ucs" ] && [ -d "$(dirname "$ucs")/ucx" ]; then
  mkdir -p "$pack/mpich/lib/ucx"
  for m in "$(dirname "$ucs")"/ucx/*.so.0; do cp "$(readlink -f "$m")" "$pack/mpich/lib/ucx/$(basename "$m")"; done
fi
strip --strip-unneeded "$pack"/bin/*_perf_mpi "$pack"/bin/verifiable/*.so* "$pack"/mpich/bin/* "$pack"/mpich/lib/*.so* 2>/dev/null || true
tar -C "$work/pack" -cf - nccl-tests | xz -9 -T1 >"$out.tar.xz"
echo "nccl-tests-kit: $(ls "$pack"/bin/*_perf_mpi | wc -l) tests of $(cut -d' ' -f1-2 "$src/SNAPSHOT" 2>/dev/null || echo nccl-tests) (MPI: MPICH, sm_90, $((SECONDS - start)) s) and mpiexec, $(du -sh "$out.tar.xz" | cut -f1) packed"
