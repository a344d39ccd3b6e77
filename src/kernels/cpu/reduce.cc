// reduceArrays/copyArray: pick the per-datatype kernel. Each kernel is compiled three times (AVX-512,
// AVX2, baseline x86-64) and the loader's ifunc resolver picks the best one for the CPU once; `flatten`
// inlines the loop templates into each copy so they are vectorized for that copy's instruction set.
#include "kernels/cpu/reduce.h"

#include <cassert>

#include "kernels/cpu/reduce_impl.h"

// Not under ThreadSanitizer: GCC instruments the ifunc resolvers it generates, and the loader runs
// them while relocating, before the TSan runtime is set up, so every TSan binary crashed at start
// (the baseline copy is what TSan then checks; the wider copies are the same source).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    !defined(__SANITIZE_THREAD__)
// x86-64-v4: AVX-512 F/BW/DQ/VL (BW for the 8- and 16-bit types); x86-64-v3: AVX2, FMA, F16C.
// GCC exports the clones' ifunc symbols whatever -fvisibility says: hidden_clones.map hides them.
#define LOOM_CPU_KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#elif defined(__GNUC__)
#define LOOM_CPU_KERNEL __attribute__((flatten))
#else
#define LOOM_CPU_KERNEL
#endif

namespace loom::cpu {

// Non-template entry points because target_clones needs a plain function. External linkage (kept out of
// libloom.so's exports by hidden_clones.map) because GCC's ifunc resolvers want it.
#define LOOM_REDUCE_ARGS void *dst, const void *a, const void *b, size_t n, const ReduceOp &op, bool fin
#define LOOM_COPY_ARGS void *dst, const void *src, size_t n, const ReduceOp &op, bool fin

LOOM_CPU_KERNEL void reduceInt8(LOOM_REDUCE_ARGS) { reduceAs<int8_t>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceUint8(LOOM_REDUCE_ARGS) { reduceAs<uint8_t>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceInt32(LOOM_REDUCE_ARGS) { reduceAs<int32_t>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceUint32(LOOM_REDUCE_ARGS) { reduceAs<uint32_t>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceInt64(LOOM_REDUCE_ARGS) { reduceAs<int64_t>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceUint64(LOOM_REDUCE_ARGS) { reduceAs<uint64_t>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceFloat32(LOOM_REDUCE_ARGS) { reduceAs<float>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceFloat64(LOOM_REDUCE_ARGS) { reduceAs<double>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceHalf(LOOM_REDUCE_ARGS) { reduceAs<HalfCodec>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceBfloat16(LOOM_REDUCE_ARGS) { reduceAs<Bfloat16Codec>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceFp8e4m3(LOOM_REDUCE_ARGS) { reduceAs<Fp8e4m3Codec>(dst, a, b, n, op, fin); }
LOOM_CPU_KERNEL void reduceFp8e5m2(LOOM_REDUCE_ARGS) { reduceAs<Fp8e5m2Codec>(dst, a, b, n, op, fin); }

LOOM_CPU_KERNEL void copyInt8(LOOM_COPY_ARGS) { copyAs<int8_t>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyUint8(LOOM_COPY_ARGS) { copyAs<uint8_t>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyInt32(LOOM_COPY_ARGS) { copyAs<int32_t>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyUint32(LOOM_COPY_ARGS) { copyAs<uint32_t>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyInt64(LOOM_COPY_ARGS) { copyAs<int64_t>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyUint64(LOOM_COPY_ARGS) { copyAs<uint64_t>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyFloat32(LOOM_COPY_ARGS) { copyAs<float>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyFloat64(LOOM_COPY_ARGS) { copyAs<double>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyHalf(LOOM_COPY_ARGS) { copyAs<HalfCodec>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyBfloat16(LOOM_COPY_ARGS) { copyAs<Bfloat16Codec>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyFp8e4m3(LOOM_COPY_ARGS) { copyAs<Fp8e4m3Codec>(dst, src, n, op, fin); }
LOOM_CPU_KERNEL void copyFp8e5m2(LOOM_COPY_ARGS) { copyAs<Fp8e5m2Codec>(dst, src, n, op, fin); }

#undef LOOM_REDUCE_ARGS
#undef LOOM_COPY_ARGS

}  // namespace loom::cpu

namespace loom {

// dtype was validated at the API edge; an unknown one is a bug in the caller.
void reduceArrays(void* dst, const void* a, const void* b, size_t count, loomDataType_t dtype,
                  const ReduceOp& op, bool finalize) {
  switch (dtype) {
    case loomInt8: cpu::reduceInt8(dst, a, b, count, op, finalize); return;
    case loomUint8: cpu::reduceUint8(dst, a, b, count, op, finalize); return;
    case loomInt32: cpu::reduceInt32(dst, a, b, count, op, finalize); return;
    case loomUint32: cpu::reduceUint32(dst, a, b, count, op, finalize); return;
    case loomInt64: cpu::reduceInt64(dst, a, b, count, op, finalize); return;
    case loomUint64: cpu::reduceUint64(dst, a, b, count, op, finalize); return;
    case loomFloat16: cpu::reduceHalf(dst, a, b, count, op, finalize); return;
    case loomFloat32: cpu::reduceFloat32(dst, a, b, count, op, finalize); return;
    case loomFloat64: cpu::reduceFloat64(dst, a, b, count, op, finalize); return;
    case loomBfloat16: cpu::reduceBfloat16(dst, a, b, count, op, finalize); return;
    case loomFloat8e4m3: cpu::reduceFp8e4m3(dst, a, b, count, op, finalize); return;
    case loomFloat8e5m2: cpu::reduceFp8e5m2(dst, a, b, count, op, finalize); return;
    default: assert(false && "reduceArrays: unknown datatype"); return;
  }
}

void copyArray(void* dst, const void* src, size_t count, loomDataType_t dtype, const ReduceOp& op,
               bool finalize) {
  switch (dtype) {
    case loomInt8: cpu::copyInt8(dst, src, count, op, finalize); return;
    case loomUint8: cpu::copyUint8(dst, src, count, op, finalize); return;
    case loomInt32: cpu::copyInt32(dst, src, count, op, finalize); return;
    case loomUint32: cpu::copyUint32(dst, src, count, op, finalize); return;
    case loomInt64: cpu::copyInt64(dst, src, count, op, finalize); return;
    case loomUint64: cpu::copyUint64(dst, src, count, op, finalize); return;
    case loomFloat16: cpu::copyHalf(dst, src, count, op, finalize); return;
    case loomFloat32: cpu::copyFloat32(dst, src, count, op, finalize); return;
    case loomFloat64: cpu::copyFloat64(dst, src, count, op, finalize); return;
    case loomBfloat16: cpu::copyBfloat16(dst, src, count, op, finalize); return;
    case loomFloat8e4m3: cpu::copyFp8e4m3(dst, src, count, op, finalize); return;
    case loomFloat8e5m2: cpu::copyFp8e5m2(dst, src, count, op, finalize); return;
    default: assert(false && "copyArray: unknown datatype"); return;
  }
}

}  // namespace loom

#undef LOOM_CPU_KERNEL  // unity builds: the sources compiled after this one do not see it
